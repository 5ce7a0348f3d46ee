//! The stream readers against valid and hostile streams: every broken stream
//! is an error with a line number, never a silently short result.

use pbf_stream::*;

fn source_line() -> String {
    r#"{"type":"source","schema":"pbf-sort/index","version":3,"path":"/x.pbf","size":1000,"mtime":5,"mtime_nsec":0,"header":{"required_features":["OsmSchema-V0.6"]}}"#.into()
}

fn blob_line(seq: u64, offset: u64) -> String {
    format!(
        r#"{{"type":"blob","seq":{seq},"offset":{offset},"length":100,"compression":"zlib","first":{{"kind":"node","id":1,"version":1}},"last":{{"kind":"node","id":9,"version":1}},"counts":{{"node":3,"way":0,"relation":0}},"sorted":true,"from":"decoded","future_field":7}}"#
    )
}

fn end_line(blobs: u64, nodes: u64) -> String {
    format!(r#"{{"type":"end","blobs":{blobs},"counts":{{"node":{nodes},"way":0,"relation":0}}}}"#)
}

fn read_index(text: &str) -> Result<Vec<IndexRecord>, String> {
    let mut r = IndexReader::new(text.as_bytes());
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(rec)) => out.push(rec),
            Ok(None) => return Ok(out),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[test]
fn index_sections_and_unknown_fields() {
    let one = [
        source_line(),
        blob_line(0, 10),
        blob_line(1, 110),
        end_line(2, 6),
    ]
    .join("\n");
    let two = format!("{one}\n{one}\n");
    let recs = read_index(&two).expect("valid");
    assert_eq!(recs.len(), 8);
}

/// A source record's samples: read when present (in the key form of
/// blob records, ids beyond 2^53 as strings), empty when absent, and
/// written only when there are any.
#[test]
fn source_samples_are_optional() {
    let with = source_line().replace(
        r#""header":"#,
        r#""samples":[{"offset":200,"first":{"kind":"node","id":"-9007199254740993","version":1}},{"offset":600,"first":{"kind":"way","id":7,"version":0},"more":1}],"header":"#,
    );
    let read =
        |line: &str| match &read_index(&[line, &end_line(0, 0)].join("\n")).expect("valid")[0] {
            IndexRecord::Source(s) => s.clone(),
            other => panic!("not a source record: {other:?}"),
        };
    let src = read(&with);
    let keys: Vec<(u64, pbf_format::Key)> = src
        .samples
        .iter()
        .map(|s| (s.offset, s.first.into()))
        .collect();
    assert_eq!(
        keys,
        [
            (
                200,
                pbf_format::Key::new(pbf_format::Kind::Node, -9_007_199_254_740_993, 1)
            ),
            (600, pbf_format::Key::new(pbf_format::Kind::Way, 7, 0)),
        ]
    );
    let written = serde_json::to_string(&IndexRecord::Source(src.clone())).expect("json");
    assert!(written.contains(r#""id":"-9007199254740993""#), "{written}");
    assert_eq!(read(&written), src);
    let without = read(&source_line());
    assert!(without.samples.is_empty());
    let written = serde_json::to_string(&IndexRecord::Source(without)).expect("json");
    assert!(!written.contains("samples"), "{written}");
}

#[test]
fn index_errors_name_the_line() {
    let cases = [
        (
            vec![source_line(), blob_line(0, 10)],
            "line 3: stream ended without an end record",
        ),
        (
            vec![source_line(), blob_line(0, 10), end_line(2, 3)],
            "line 3: the end record says 2 blobs holding 3 nodes, 0 ways, 0 relations, 0 \
             changesets, the section's blob records add up to 1 blob holding 3 nodes",
        ),
        (
            vec![blob_line(0, 10)],
            "line 1: record before the source record",
        ),
        (
            vec![source_line(), source_line()],
            "line 2: source record inside an open section",
        ),
        (
            vec![source_line().replace("\"version\":3", "\"version\":4")],
            "line 1: pbf-sort/index version 4 is not supported",
        ),
        (
            // A version-1 stream (mtime_ns instead of mtime) is named as such.
            vec![
                source_line()
                    .replace("\"version\":3", "\"version\":1")
                    .replace(
                        "\"mtime\":5,\"mtime_nsec\":0",
                        "\"mtime_ns\":1795306238610034587",
                    ),
            ],
            "line 1: pbf-sort/index version 1 is not supported (this tool reads version 3)",
        ),
        (
            vec![source_line(), r#"{"type":"bogus"}"#.into()],
            "line 2: invalid record: unknown variant `bogus`",
        ),
        (
            vec![
                source_line(),
                blob_line(0, 10).replace("\"offset\":10", "\"offset\":\"x\""),
            ],
            "line 2: invalid record",
        ),
        (
            vec![source_line(), r#"{"seq":1}"#.into()],
            "line 2: record has no \"type\" field",
        ),
        (vec![], "empty index stream"),
        (
            // Pretty-printed (jq .): the first line opens an object.
            vec!["{".into(), r#"  "type": "source","#.into()],
            "line 1: a JSON object that does not end on its line, as in a pretty-printed \
             stream: stream records are one JSON object per line (jq -c keeps them so",
        ),
        (
            vec![source_line(), r#"{"type": "blob","#.into()],
            "line 2: a JSON object that does not end on its line",
        ),
        (
            // Cut short (a writer that died), not where a line breaks.
            vec![source_line(), blob_line(0, 10)[..40].into()],
            "line 2: invalid record: EOF while parsing",
        ),
    ];
    for (lines, want) in cases {
        let err = read_index(&lines.join("\n")).expect_err(want);
        assert!(err.contains(want), "want {want:?}, got {err:?}");
    }
}

#[test]
fn a_pbf_file_given_for_a_stream_is_named_as_one() {
    // A PBF file's first bytes: a BlobHeader length, then an OSMHeader
    // BlobHeader, whose first byte (0x0a) is a newline.
    let pbf: &[u8] = b"\0\0\0\x0d\x0a\x09OSMHeader\x18\x9a\x01\x10\x01";
    let want = "line 1: a PBF file, not a JSON Lines stream";
    let index = IndexReader::new(pbf).next_record().expect_err("index");
    assert!(index.to_string().starts_with(want), "{index}");
    let plan = PlanReader::new(pbf).expect_err("plan");
    assert!(plan.to_string().starts_with(want), "{plan}");
}

fn plan_line(size: u64) -> String {
    format!(
        r#"{{"type":"plan","schema":"pbf-sort/plan","version":3,"sources":[{{"id":0,"path":"/x.pbf","size":{size},"mtime":1,"mtime_nsec":0}}],"header":{{}}}}"#
    )
}

fn read_plan(text: &str) -> Result<Vec<PlanRecord>, String> {
    let mut r = PlanReader::new(text.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    loop {
        match r.next_op() {
            Ok(Some(op)) => out.push(op),
            Ok(None) => return Ok(out),
            Err(e) => return Err(e.to_string()),
        }
    }
}

const COPY: &str = r#"{"type":"copy","source":0,"offset":10,"length":90,"blobs":1,"first":{"kind":"node","id":1,"version":1},"last":{"kind":"node","id":4,"version":1},"elements":4}"#;
const END: &str = r#"{"type":"end","ops":1,"copy_bytes":90,"merge_inputs":0,"elements":4}"#;

#[test]
fn plan_valid() {
    let ops = read_plan(&[plan_line(100), COPY.into(), END.into()].join("\n")).expect("valid");
    assert!(matches!(&ops[..], [PlanRecord::Copy(c)] if c.length == 90));
}

/// An op removed with jq, the end record left as it was: the end record's
/// presence is what says no stage died, its counts are not checked.
#[test]
fn an_edited_plan_needs_no_recounted_end() {
    let edited = [plan_line(100), END.replace("\"ops\":1", "\"ops\":2")].join("\n");
    assert_eq!(read_plan(&edited).expect("read").len(), 0);
    let cut = [plan_line(100), COPY.into()].join("\n");
    assert!(read_plan(&cut).is_err(), "a plan without end is refused");
}

const SORTED: &str = r#"{"type":"sorted","source":0,"through":60}"#;

#[test]
fn a_sorted_record_before_the_ops_is_read() {
    let ops = read_plan(&[plan_line(100), SORTED.into(), COPY.into(), END.into()].join("\n"))
        .expect("valid");
    assert!(
        matches!(&ops[..], [PlanRecord::Sorted(s), PlanRecord::Copy(_)] if s.through == 60),
        "{ops:?}"
    );
}

#[test]
fn plan_errors_name_the_line() {
    let past_end = COPY.replace("\"length\":90", "\"length\":91");
    let bad_source = COPY.replace("\"source\":0", "\"source\":3");
    let negative = COPY.replace("\"offset\":10", "\"offset\":-10");
    let zero = COPY.replace("\"length\":90", "\"length\":0");
    let cases = [
        (
            vec![plan_line(100), COPY.into()],
            "stream ended without an end record",
        ),
        (
            vec![plan_line(100), past_end, END.into()],
            "line 2: range 10+91 lies outside /x.pbf (100 bytes)",
        ),
        (
            vec![plan_line(100), bad_source, END.into()],
            "line 2: op names source 3",
        ),
        (
            vec![plan_line(100), negative, END.into()],
            "line 2: invalid record",
        ),
        (vec![plan_line(100), zero, END.into()], "line 2: range 10+0"),
        (
            vec![plan_line(100), COPY.into(), END.into(), COPY.into()],
            "line 4: records after the end record",
        ),
        (
            vec![plan_line(100), plan_line(100)],
            "line 2: second plan record",
        ),
        (
            vec![COPY.into()],
            "line 1: plan stream does not start with a plan record",
        ),
        (
            vec![plan_line(100).replace("\"version\":3", "\"version\":9")],
            "line 1: pbf-sort/plan version 9 is not supported",
        ),
        (vec![], "empty plan stream"),
        (
            vec![plan_line(100), COPY.into(), SORTED.into(), END.into()],
            "line 3: sorted record after an op",
        ),
        (
            vec![
                plan_line(100),
                SORTED.replace("60", "101"),
                COPY.into(),
                END.into(),
            ],
            "line 2: sorted record: offset 101 of source 0 lies outside",
        ),
        (
            vec![
                plan_line(100),
                SORTED.replace("\"source\":0", "\"source\":2"),
                END.into(),
            ],
            "line 2: sorted record: offset 60 of source 2 lies outside",
        ),
    ];
    for (lines, want) in cases {
        let err = read_plan(&lines.join("\n")).expect_err(want);
        assert!(err.contains(want), "want {want:?}, got {err:?}");
    }
}

/// A copy op of `length` bytes at `offset` with keys n`first`..n`last`.
fn copy_line(offset: u64, first: i64, last: i64) -> String {
    COPY.replace("\"offset\":10", &format!("\"offset\":{offset}"))
        .replace("\"length\":90", "\"length\":10")
        .replace("\"id\":1,", &format!("\"id\":{first},"))
        .replace("\"id\":4,", &format!("\"id\":{last},"))
}

fn end_of(ops: u64) -> String {
    format!(
        r#"{{"type":"end","ops":{ops},"copy_bytes":{},"merge_inputs":0,"elements":{}}}"#,
        10 * ops,
        4 * ops
    )
}

#[test]
fn ops_in_output_order_are_read_and_others_refused_naming_both_lines() {
    let ordered = [
        plan_line(100),
        copy_line(20, 1, 5),
        copy_line(10, 5, 7),
        copy_line(60, 8, 9),
        end_of(3),
    ];
    assert_eq!(read_plan(&ordered.join("\n")).expect("in order").len(), 3);
    let swapped = [
        plan_line(100),
        copy_line(10, 1, 7),
        copy_line(20, 5, 9),
        end_of(2),
    ];
    let err = read_plan(&swapped.join("\n")).expect_err("out of order");
    assert!(
        err.starts_with(
            "line 3: copy op n5 v1..n9 v1 starts before the op on line 2 ends (n7 v1): the ops \
             are not in output order"
        ),
        "{err}"
    );
    let twice = [
        plan_line(100),
        copy_line(10, 1, 2),
        copy_line(15, 3, 4),
        end_of(2),
    ];
    let err = read_plan(&twice.join("\n")).expect_err("read twice");
    assert!(
        err.contains("line 3: copy op reads bytes 15..25 of /x.pbf, and the op on line 2"),
        "{err}"
    );
}

#[test]
fn overlong_line_is_refused_without_buffering_it() {
    // A reader that yields an endless line: the reader must stop at MAX_LINE.
    struct Endless;
    impl std::io::Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(b'x');
            Ok(buf.len())
        }
    }
    let mut r = LineReader::new(std::io::BufReader::with_capacity(1 << 20, Endless));
    let err = r.next_line().expect_err("too long");
    assert!(
        err.to_string().contains("line 1: line longer than"),
        "{err}"
    );
}

#[test]
fn records_round_trip_through_the_writer() {
    let mut w = Writer::new(Vec::new());
    let end = PlanEnd {
        ops: 1,
        copy_bytes: 2,
        merge_inputs: 3,
        elements: 4,
    };
    w.write(&PlanRecord::End(end)).expect("write");
    let bytes = w.finish().expect("finish");
    assert_eq!(
        String::from_utf8(bytes).expect("utf8"),
        "{\"type\":\"end\",\"ops\":1,\"copy_bytes\":2,\"merge_inputs\":3,\"elements\":4}\n"
    );
}

/// A merge op written input by input is the line `write` makes of the
/// whole op, whether it fits one chunk or takes many.
#[test]
fn a_merge_op_written_input_by_input_is_the_same_line() {
    let key = |id: i64| KeyRecord {
        kind: pbf_format::Kind::Way,
        id,
        version: 1,
    };
    for n in [1u64, 3, 2000] {
        let inputs: Vec<MergeInput> = (0..n)
            .map(|i| MergeInput {
                source: (i % 3) as u32,
                offset: 1000 * i,
                length: 900 + i,
                first: key(i as i64),
                last: key(1 << 60),
                sorted: i % 2 == 0,
                elements: i + 1,
            })
            .collect();
        let op = MergeOp {
            inputs: inputs.clone(),
            first: key(0),
            last: key(1 << 60),
            elements: 77,
        };
        let mut whole = Writer::new(Vec::new());
        whole.write(&PlanRecord::Merge(op)).expect("write");
        let mut chunks = Writer::new(Vec::new());
        chunks
            .write_merge(key(0), key(1 << 60), 77, inputs)
            .expect("write_merge");
        let (whole, chunks) = (
            whole.finish().expect("whole"),
            chunks.finish().expect("chunks"),
        );
        assert!(
            n < 2000 || chunks.len() > 2 * MERGE_CHUNK,
            "{}",
            chunks.len()
        );
        assert_eq!(String::from_utf8(chunks), String::from_utf8(whole));
    }
}

/// A blob record as our writer orders it (the fast path) and with its keys
/// in another order (the general path) reads the same; a broken blob line
/// fails either way.
#[test]
fn blob_records_read_the_same_in_any_key_order() {
    let fast = blob_line(0, 10);
    assert!(fast.starts_with(r#"{"type":"blob","#));
    let moved = fast.replacen(r#""type":"blob","#, "", 1).replacen(
        r#""from":"decoded","#,
        r#""from":"decoded","type":"blob","#,
        1,
    );
    assert!(!moved.starts_with(r#"{"type":"blob","#), "{moved}");
    let read =
        |blob: &str| read_index(&[source_line(), blob.to_owned(), end_line(1, 3)].join("\n"));
    assert_eq!(read(&fast).expect("fast"), read(&moved).expect("general"));
    for broken in [
        fast.replace(r#""seq":0,"#, ""),
        fast.replace(r#""length":100"#, r#""length":-1"#),
        fast.replace(r#""kind":"node""#, r#""kind":"nodes""#),
    ] {
        let err = read(&broken).expect_err(&broken);
        assert!(err.contains("line 2"), "{err}");
    }
}

#[test]
fn untimed_streams_measure_nothing() {
    let end = PlanEnd {
        ops: 0,
        copy_bytes: 0,
        merge_inputs: 0,
        elements: 0,
    };
    let write = |timed: bool| {
        let mut w = Writer::new(Vec::new()).timed(timed);
        for _ in 0..1000 {
            w.write(&PlanRecord::End(end)).expect("write");
        }
        w.serialise_time()
    };
    assert!(write(true) > std::time::Duration::ZERO);
    assert_eq!(write(false), std::time::Duration::ZERO);
    let lines = "{\"type\":\"x\"}\n".repeat(1000);
    let read = |timed: bool| {
        let mut r = LineReader::new(lines.as_bytes()).timed(timed);
        while let Ok(Some(_)) = r.next_record::<serde_json::Value>() {}
        r.parse_time()
    };
    assert!(read(true) > std::time::Duration::ZERO);
    assert_eq!(read(false), std::time::Duration::ZERO);
}

/// A plan whose merge op lists `n` blobs one after the other, each holding
/// nodes `i` to `i + 4`, with the merge line in the writer's form.
fn plan_with_merge(n: u64) -> (String, MergeOp) {
    let key = |id: u64| KeyRecord {
        kind: pbf_format::Kind::Node,
        id: id as i64,
        version: 1,
    };
    let inputs: Vec<MergeInput> = (0..n)
        .map(|i| MergeInput {
            source: 0,
            offset: 100 + 300 * i,
            length: 300,
            first: key(i),
            last: key(i + 4),
            sorted: true,
            elements: 5,
        })
        .collect();
    let op = MergeOp {
        inputs,
        first: key(0),
        last: key(n + 3),
        elements: 5 * n,
    };
    let mut w = Writer::new(Vec::new());
    w.write(&PlanRecord::Merge(op.clone())).expect("write");
    let end = format!(
        r#"{{"type":"end","ops":1,"copy_bytes":0,"merge_inputs":{n},"elements":{}}}"#,
        5 * n
    );
    let merge = String::from_utf8(w.finish().expect("finish")).expect("utf-8");
    let text = format!("{}\n{merge}{end}\n", plan_line(100 + 300 * n));
    (text, op)
}

/// A merge line of megabytes is read while it arrives, in chunks: it reads
/// as the op written, from a reader that gives a few bytes at a time too;
/// in another form (serde's, with spaces) it reads the same; damaged, its
/// error names its line.
#[test]
fn long_merge_lines_read_whole_in_any_form() {
    let (text, op) = plan_with_merge(20_000);
    assert!(text.len() > 3 << 20, "{}", text.len());
    let want = vec![PlanRecord::Merge(op.clone())];
    assert_eq!(read_plan(&text), Ok(want.clone()));
    let slow = std::io::BufReader::with_capacity(7, text.as_bytes());
    let mut r = PlanReader::new(slow).expect("plan record");
    assert_eq!(r.next_op().expect("merge op"), Some(want[0].clone()));
    assert_eq!(r.next_op().expect("end"), None);
    let spaced = text.replace(r#","sorted":"#, r#", "sorted": "#);
    assert_eq!(read_plan(&spaced), Ok(want));
    let damaged = text.replacen(r#""offset":30100"#, r#""offset":-30100"#, 1);
    let err = read_plan(&damaged).expect_err("damaged");
    assert!(err.starts_with("line 2:"), "{err}");
}

/// A merge line that never ends is refused at the longest line, whether
/// read in chunks or not.
#[test]
fn an_endless_merge_line_is_refused() {
    struct Endless(usize);
    impl std::io::Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let head = format!("{}\n{{\"type\":\"merge\",\"inputs\":[", plan_line(1));
            let head = head.as_bytes();
            let n = buf.len().min(head.len().saturating_sub(self.0));
            buf[..n].copy_from_slice(&head[self.0..self.0 + n]);
            buf[n..].fill(b'x');
            self.0 += n;
            Ok(buf.len())
        }
    }
    let mut r = PlanReader::new(std::io::BufReader::new(Endless(0))).expect("plan record");
    let err = r.next_op().expect_err("too long").to_string();
    assert!(err.contains("line 2: line longer than"), "{err}");
}
