//! What a user should run when an input is not PBF. pbf-format's sniff
//! says what the file is ([`NotPbf`]); this says how to get a PBF from it,
//! as a command to paste, after the error that names the file.

use pbf_format::sniff::NotPbf;

/// The advice for `cause`, one cause of an error, when it is an input that
/// is not PBF but of a kind that converts: how to get a PBF from the file
/// it names.
pub(crate) fn for_cause(cause: &(dyn std::error::Error + 'static)) -> Option<String> {
    let e = cause.downcast_ref::<pbf_format::Error>()?;
    match e.kind() {
        pbf_format::ErrorKind::NotPbf(kind) => advice(kind, &e.path()?.display().to_string()),
        _ => None,
    }
}

/// How to get a PBF from an input `name` of this kind, as a command to
/// paste; `None` for an empty file or unknown data. osmium converts XML,
/// OPL and o5m (told the format with `-F`, so the name's suffix does not
/// matter); a compressed input is decompressed first, into `pbf-sort -`
/// when it holds PBF, else into osmium (which reads no xz or zstd).
/// Standard input (`-`, `/dev/stdin`, or named in words) and a pipe of
/// the shell's (`/dev/fd/N`, from `<(...)`) are streams, read once: the
/// command starts with `... |`, the place of whatever wrote them.
fn advice(kind: &NotPbf, name: &str) -> Option<String> {
    let stream =
        ["-", "/dev/stdin", crate::input_name("-")].contains(&name) || name.starts_with("/dev/fd/");
    // What reads the input: NAME as an argument, or a pipe from "...".
    let (from, arg) = if stream {
        ("... | ".to_owned(), "-".to_owned())
    } else {
        (String::new(), shell_word(name))
    };
    let sort = "pbf-sort - -o OUT.osm.pbf";
    // osmium's name of the format (its -F).
    let convert = |format: &str| {
        format!("convert it: {from}osmium cat -F {format} {arg} -f pbf -o - | {sort}")
    };
    Some(match kind {
        NotPbf::Xml => convert("xml"),
        NotPbf::Opl => convert("opl"),
        NotPbf::O5m => convert("o5m"),
        NotPbf::Compressed(tool) => {
            let unpack = if stream {
                format!("{from}{tool} -dc")
            } else {
                format!("{tool} -dc {arg}")
            };
            format!(
                "if it holds PBF, decompress it: {unpack} | {sort}; \
                 if OSM XML: {unpack} | osmium cat -F xml - -f pbf -o - | {sort}"
            )
        }
        NotPbf::Empty | NotPbf::Unknown(_) => return None,
    })
}

/// `name` as one word of a shell command line that no command takes for
/// an option: as it is when it holds only characters no shell treats
/// specially, else in single quotes; `./` before a leading `-`.
fn shell_word(name: &str) -> String {
    let dot = if name.starts_with('-') { "./" } else { "" };
    let name = format!("{dot}{name}");
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+,:@%=".contains(c);
    if !name.is_empty() && name.chars().all(plain) {
        name
    } else {
        format!("'{}'", name.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line an error for `kind` in a file `name` ends in.
    fn said(kind: NotPbf, name: &str) -> String {
        format!("{kind}: {}", advice(&kind, name).expect("advice"))
    }

    #[test]
    fn advice_is_a_command_for_a_file_or_for_a_stream() {
        let bz2 = NotPbf::Compressed("bzip2");
        assert_eq!(
            said(bz2, "x.osm.pbf.bz2"),
            "this is bzip2-compressed data, not PBF: if it holds PBF, decompress it: \
             bzip2 -dc x.osm.pbf.bz2 | pbf-sort - -o OUT.osm.pbf; if OSM XML: bzip2 -dc \
             x.osm.pbf.bz2 | osmium cat -F xml - -f pbf -o - | pbf-sort - -o OUT.osm.pbf"
        );
        for stdin in ["/dev/stdin", "standard input"] {
            assert_eq!(
                said(NotPbf::Xml, stdin),
                "this is OSM XML, not PBF: convert it: ... | osmium cat -F xml - -f pbf -o - \
                 | pbf-sort - -o OUT.osm.pbf"
            );
        }
        assert_eq!(
            said(NotPbf::Compressed("zstd"), "-"),
            "this is zstd-compressed data, not PBF: if it holds PBF, decompress it: ... | \
             zstd -dc | pbf-sort - -o OUT.osm.pbf; if OSM XML: ... | zstd -dc | osmium cat \
             -F xml - -f pbf -o - | pbf-sort - -o OUT.osm.pbf"
        );
        assert!(said(NotPbf::Xml, "/dev/fd/63").contains(": ... | osmium cat -F xml - -f"));
        assert!(said(NotPbf::Opl, "my data/a.opl").contains("-F opl 'my data/a.opl' -f"));
        assert!(said(NotPbf::O5m, "-x.o5m").contains("-F o5m ./-x.o5m -f"));
        assert!(said(NotPbf::Xml, "it's.osm").contains(r"'it'\''s.osm'"));
        assert_eq!(advice(&NotPbf::Empty, "e.pbf"), None);
    }
}
