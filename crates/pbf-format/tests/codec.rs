//! The block codec against itself and against osmium: random elements must
//! survive `decode_block(encode_block(x))` unchanged, damaged blocks must give
//! errors rather than panics, and re-encoding every data block of the real
//! files in `tests/fixtures` (or `$PBF_SORT_TEST_DATA`) must leave `osmium cat -f opl` output unchanged.
//! Blocks decoded as columns must encode to the same bytes as the elements
//! decoded from them, also when a block takes its objects from several
//! decoded blocks, and the encoder must write what prost writes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use pbf_format::block::{
    Changeset, Columns, Decoder, Element, EncodeOptions, Info, Member, Node, Obj, Relation, Str,
    Tag, Way, decode_block, decode_columns, encode_block, encode_objects, split_points,
};
use pbf_format::compress::{self, Compression};
use pbf_format::frame::{self, BlobType, PbfFile};
use pbf_format::{Kind, Result};
use proptest::prelude::*;
use prost::Message;

mod proto;

// ------------------------------------------------------------ strategies

fn string() -> impl Strategy<Value = Str> {
    let common = prop::sample::select(vec!["", "highway", "name", "yes", "outer", "Zürich"]);
    prop_oneof![
        3 => common.prop_map(|s| Str::from(s.as_bytes())),
        1 => prop::collection::vec(any::<u8>(), 0..8).prop_map(Str::from),
    ]
}

fn tags() -> impl Strategy<Value = Vec<Tag>> {
    prop::collection::vec((string(), string()), 0..4)
}

fn id() -> impl Strategy<Value = i64> {
    prop_oneof![3 => -1000i64..1000, 1 => any::<i64>()]
}

/// Nanodegrees; multiples of 100 only when `coarse`, so both block scales occur.
fn coordinate(coarse: bool) -> BoxedStrategy<i64> {
    let standard = (-1_800_000_000i64..=1_800_000_000).prop_map(|c| c * 100);
    if coarse {
        standard.boxed()
    } else {
        prop_oneof![standard, any::<i64>()].boxed()
    }
}

/// Milliseconds; whole seconds only when `whole`.
fn timestamp(whole: bool) -> BoxedStrategy<i64> {
    let seconds = (0i64..2_000_000_000).prop_map(|s| s * 1000);
    if whole {
        seconds.boxed()
    } else {
        prop_oneof![seconds, any::<i64>()].boxed()
    }
}

fn info(whole: bool) -> impl Strategy<Value = Option<Info>> {
    let version = prop_oneof![Just(-1), 1..5i32, any::<i32>()];
    let fields = (
        version,
        timestamp(whole),
        any::<i64>(),
        any::<i32>(),
        string(),
        any::<Option<bool>>(),
    );
    let info = fields.prop_map(
        |(version, timestamp_ms, changeset, uid, user, visible)| Info {
            version,
            timestamp_ms,
            changeset,
            uid,
            user,
            visible,
        },
    );
    prop::option::of(info)
}

fn node(coarse: bool, whole: bool) -> impl Strategy<Value = Element> {
    (
        id(),
        info(whole),
        coordinate(coarse),
        coordinate(coarse),
        tags(),
    )
        .prop_map(|(id, info, lat, lon, tags)| {
            Element::Node(Node {
                id,
                info,
                lat,
                lon,
                tags,
            })
        })
}

fn way(coarse: bool, whole: bool) -> impl Strategy<Value = Element> {
    let refs = prop::collection::vec(id(), 0..6);
    let location = (coordinate(coarse), coordinate(coarse));
    let refs_and_locations = (refs, any::<bool>()).prop_flat_map(move |(refs, located)| {
        let n = if located { refs.len() } else { 0 };
        (Just(refs), prop::collection::vec(location.clone(), n))
    });
    (id(), info(whole), tags(), refs_and_locations).prop_map(
        |(id, info, tags, (refs, locations))| {
            Element::Way(Way {
                id,
                info,
                tags,
                refs,
                locations,
            })
        },
    )
}

fn member() -> impl Strategy<Value = Member> {
    let kind = prop::sample::select(vec![Kind::Node, Kind::Way, Kind::Relation]);
    (kind, id(), string()).prop_map(|(kind, id, role)| Member { kind, id, role })
}

fn relation(whole: bool) -> impl Strategy<Value = Element> {
    let members = prop::collection::vec(member(), 0..5);
    (id(), info(whole), tags(), members).prop_map(|(id, info, tags, members)| {
        Element::Relation(Relation {
            id,
            info,
            tags,
            members,
        })
    })
}

fn element(coarse: bool, whole: bool) -> impl Strategy<Value = Element> {
    prop_oneof![
        4 => node(coarse, whole),
        2 => way(coarse, whole),
        1 => relation(whole),
        1 => any::<i64>().prop_map(|id| Element::Changeset(Changeset { id })),
    ]
}

/// Blocks in which every coordinate is a multiple of 100 and every timestamp
/// a whole second (or not), in any order of kinds.
fn elements() -> impl Strategy<Value = Vec<Element>> {
    (any::<bool>(), any::<bool>())
        .prop_flat_map(|(coarse, whole)| prop::collection::vec(element(coarse, whole), 0..40))
}

fn options() -> impl Strategy<Value = EncodeOptions> {
    (1usize..20, 200usize..4000, any::<bool>()).prop_map(
        |(max_elements, max_bytes, dense_nodes)| EncodeOptions {
            max_elements,
            max_bytes,
            dense_nodes,
        },
    )
}

// ------------------------------------------------------------ properties

proptest! {
    #[test]
    fn encode_then_decode_is_identity(elements in elements(), dense in any::<bool>()) {
        let opts = EncodeOptions { dense_nodes: dense, ..EncodeOptions::default() };
        let decoded = decode_block(&encode_block(&elements, &opts)).expect("decode");
        prop_assert_eq!(decoded, elements);
    }

    /// Columns give the same views as the elements decoded from the same
    /// block: same bytes out of the encoder, same keys, ties and shapes.
    #[test]
    fn columns_encode_like_elements(elements in elements(), dense in any::<bool>()) {
        let opts = EncodeOptions { dense_nodes: dense, ..EncodeOptions::default() };
        let bytes = encode_block(&elements, &opts);
        same_views(&bytes, &opts);
    }

    /// Objects of several decoded blocks, in any order, encode as the same
    /// elements do (each source block maps its string indexes on its own).
    #[test]
    fn views_of_several_blocks_encode_like_elements(
        (elements, parts, order) in (elements(), 1..4usize).prop_flat_map(|(e, parts)| {
            let order: Vec<usize> = (0..e.len()).collect();
            (Just(e), Just(parts), Just(order).prop_shuffle())
        }),
        dense in any::<bool>(),
    ) {
        let opts = EncodeOptions { dense_nodes: dense, ..EncodeOptions::default() };
        let blocks: Vec<_> = (0..parts)
            .map(|p| {
                let part: Vec<Element> = elements.iter().skip(p).step_by(parts).cloned().collect();
                decode_columns(&encode_block(&part, &opts)).expect("decode columns")
            })
            .collect();
        let views: Vec<Obj<'_>> = order.iter().map(|&i| blocks[i % parts].get(i / parts)).collect();
        let owned: Vec<Element> = order.iter().map(|&i| elements[i].clone()).collect();
        prop_assert!(encode_objects(&views, &opts) == encode_block(&owned, &opts));
    }

    /// Blocks decoded one after another into the same columns, by one
    /// decoder, hold the elements of each in turn.
    #[test]
    fn blocks_decoded_into_one_set_of_columns_keep_their_elements(
        elements in elements(),
        parts in 1..4usize,
        dense in any::<bool>(),
    ) {
        let opts = EncodeOptions { dense_nodes: dense, ..EncodeOptions::default() };
        let size = elements.len().div_ceil(parts).max(1);
        let mut columns = Columns::default();
        let mut decoder = Decoder::default();
        for part in elements.chunks(size) {
            let before = columns.len();
            let added = decoder.decode_into(&encode_block(part, &opts), &mut columns).expect("decode");
            prop_assert_eq!(added, before..before + part.len());
        }
        prop_assert_eq!(columns.to_elements(), elements);
    }

    /// The encoder's bytes are what prost writes for the messages they hold:
    /// fields in number order, every length right, nothing written twice.
    #[test]
    fn blocks_are_what_prost_writes(elements in elements(), dense in any::<bool>()) {
        let opts = EncodeOptions { dense_nodes: dense, ..EncodeOptions::default() };
        let bytes = encode_block(&elements, &opts);
        let block = proto::PrimitiveBlock::decode(&bytes[..]).expect("prost decode");
        prop_assert!(block.encode_to_vec() == bytes);
    }

    #[test]
    fn split_points_cover_and_respect_limits(elements in elements(), opts in options()) {
        let chunks = split_points(&elements, &opts);
        let mut next = 0;
        for chunk in chunks {
            prop_assert_eq!(chunk.start, next);
            prop_assert!(!chunk.is_empty() && chunk.len() <= opts.max_elements);
            let slice = &elements[chunk.clone()];
            let bytes = encode_block(slice, &opts);
            prop_assert!(bytes.len() <= opts.max_bytes || slice.len() == 1);
            prop_assert_eq!(decode_block(&bytes).expect("decode"), slice);
            next = chunk.end;
        }
        prop_assert_eq!(next, elements.len());
    }

    #[test]
    fn damaged_blocks_never_panic(
        elements in elements(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode_block(&elements, &EncodeOptions::default());
        if bytes.is_empty() {
            return Ok(());
        }
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let _ = decode_block(&bytes);
        let _ = decode_block(&bytes[..cut.index(bytes.len())]);
    }
}

/// Check that the columns and the elements decoded from `block` encode to
/// the same bytes and agree on what the merge reads of each object.
fn same_views(block: &[u8], opts: &EncodeOptions) {
    let elements = decode_block(block).expect("decode");
    let columns = decode_columns(block).expect("decode columns");
    assert_eq!(columns.len(), elements.len());
    let views: Vec<Obj<'_>> = columns.views().collect();
    assert!(encode_objects(&views, opts) == encode_block(&elements, opts));
    for (view, element) in views.iter().zip(&elements) {
        assert_eq!(view.key(), element.key());
        assert_eq!(view.tie_seconds(), element.tie_seconds());
        assert_eq!(view.shape(), element.shape());
        assert_eq!(view.to_element(), *element);
    }
    assert_eq!(columns.to_elements(), elements);
}

// ------------------------------------------------------------ real files

#[test]
fn real_blocks_encode_the_same_from_columns() {
    for input in data_files() {
        let file = PbfFile::open(&input).expect("open");
        for (i, header) in file.headers().enumerate() {
            let header = header.expect("header");
            if header.blob_type != BlobType::OsmData {
                continue;
            }
            let raw =
                compress::decode_blob(&file.read_body(&header).expect("body")).expect("inflate");
            let opts = EncodeOptions {
                dense_nodes: i % 2 == 0,
                ..EncodeOptions::default()
            };
            same_views(&raw, &opts);
        }
    }
}

/// The real files: `$PBF_SORT_TEST_DATA`, else the repository's `tests/fixtures`.
fn data_dir() -> PathBuf {
    std::env::var_os("PBF_SORT_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures"))
}

fn data_files() -> Vec<PathBuf> {
    let entries = std::fs::read_dir(data_dir()).expect("read the test data directory");
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with("bad-") && (name.ends_with(".osm.pbf") || name.ends_with(".osh.pbf"))
        })
        .collect();
    files.sort();
    files
}

/// Copy `input` to `output`, re-encoding every OSMData block; nodes are
/// written dense in even blocks and plain in odd ones. Other frames are
/// copied byte for byte. Returns the number of elements re-encoded.
fn reencode(input: &Path, output: &Path) -> Result<usize> {
    let file = PbfFile::open(input)?;
    let (mut out, mut elements, mut blocks) = (Vec::new(), 0, 0);
    for header in file.headers() {
        let header = header?;
        if header.blob_type != BlobType::OsmData {
            out.extend(file.read_exact_at(header.offset, frame_len(&header), "frame")?);
            continue;
        }
        let decoded = decode_block(&compress::decode_blob(&file.read_body(&header)?)?)
            .map_err(|e| e.at(header.offset).in_file(input))?;
        let opts = EncodeOptions {
            dense_nodes: blocks % 2 == 0,
            ..EncodeOptions::default()
        };
        let blob = compress::encode_blob(&encode_block(&decoded, &opts), Compression::default())?;
        out.extend(frame::encode_frame(&BlobType::OsmData, None, &blob).expect("frame"));
        elements += decoded.len();
        blocks += 1;
    }
    std::fs::write(output, out)?;
    Ok(elements)
}

fn frame_len(header: &frame::FrameHeader) -> usize {
    usize::try_from(header.frame_len()).expect("frame length fits usize")
}

fn osmium_opl(path: &Path) -> Vec<u8> {
    let output = Command::new("osmium")
        .args(["cat", "--no-progress", "-f", "opl,locations_on_ways=true"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run osmium (osmium-tool must be installed for this test): {e}")
        });
    assert!(
        output.status.success(),
        "osmium cat {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn reencoded_files_read_the_same_in_osmium() {
    let files = data_files();
    assert!(
        !files.is_empty(),
        "no PBF files in {}",
        data_dir().display()
    );
    let scratch = std::env::temp_dir().join(format!("pbf-format-codec-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("create scratch directory");
    for input in files {
        let name = input.file_name().expect("file name");
        let output = scratch.join(name);
        let elements = reencode(&input, &output).unwrap_or_else(|e| panic!("{e}"));
        assert!(elements > 0, "{}: no elements decoded", input.display());
        let (expected, actual) = (osmium_opl(&input), osmium_opl(&output));
        assert!(
            expected == actual,
            "{}: osmium reads the re-encoded file differently",
            input.display()
        );
        std::fs::remove_file(&output).expect("remove output");
    }
    let _ = std::fs::remove_dir(&scratch);
}

#[test]
fn changeset_ids_survive() {
    let elements = vec![
        Element::Changeset(Changeset { id: i64::MIN }),
        Element::Changeset(Changeset { id: 1 }),
    ];
    let decoded =
        decode_block(&encode_block(&elements, &EncodeOptions::default())).expect("decode");
    assert_eq!(decoded, elements);
    assert!(decoded.iter().all(|e| e.kind() == Kind::Changeset));
}

#[test]
fn strings_are_shared_after_decoding() {
    let tag: Tag = (Str::from(&b"k"[..]), Str::from(&b"v"[..]));
    let node = |id| {
        Element::Node(Node {
            id,
            info: None,
            lat: 0,
            lon: 0,
            tags: vec![tag.clone()],
        })
    };
    let decoded = decode_block(&encode_block(
        &[node(1), node(2)],
        &EncodeOptions::default(),
    ))
    .expect("decode");
    let key = |e: &Element| e.tags()[0].0.clone();
    assert!(Arc::ptr_eq(&key(&decoded[0]), &key(&decoded[1])));
}

/// String table entries of every length (a length byte and a longer
/// varint), and an entry of another field between them, decode to the
/// strings the tags name; a table cut inside an entry is an error.
#[test]
fn string_tables_of_any_entry_length_decode() {
    let lengths = [0usize, 1, 127, 128, 300];
    let strings: Vec<Vec<u8>> = lengths
        .iter()
        .enumerate()
        .map(|(i, &n)| vec![b'a' + i as u8; n])
        .collect();
    let node = proto::Node {
        id: 7,
        keys: vec![2, 4],
        vals: vec![3, 1],
        info: None,
        lat: 0,
        lon: 0,
    };
    let table = proto::StringTable { s: strings.clone() }.encode_to_vec();
    // Field 2 (a varint) after the second entry: skipped, not counted.
    let split = 2 + 2 + 1;
    let mut odd = table[..split].to_vec();
    odd.extend_from_slice(&[0x10, 0x05]);
    odd.extend_from_slice(&table[split..]);
    let group = proto::PrimitiveGroup {
        nodes: vec![node],
        ..Default::default()
    }
    .encode_to_vec();
    let block = |table: &[u8]| {
        let mut b = Vec::new();
        prost::encoding::bytes::encode(1, &table.to_vec(), &mut b);
        prost::encoding::bytes::encode(2, &group, &mut b);
        b
    };
    for table in [&table, &odd] {
        let decoded = decode_block(&block(table)).expect("decode");
        let tags = decoded[0].tags();
        let want = |k: usize, v: usize| (strings[k].clone(), strings[v].clone());
        let got: Vec<(Vec<u8>, Vec<u8>)> =
            tags.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(got, vec![want(2, 3), want(4, 1)]);
    }
    for cut in [table.len() - 1, split + 10] {
        assert!(decode_block(&block(&table[..cut])).is_err(), "cut at {cut}");
    }
}
