//! `pbf-index --io pread|uring`: both ways of walking the headers give the
//! same bytes on stdout and the same one-line error on broken files.

use crate::util::*;

fn index_with(io: &str, path: &std::path::Path) -> std::process::Output {
    let mut c = bin("pbf-index");
    c.args(["-q", "--io", io]).arg(path);
    run(c)
}

#[test]
fn pread_and_uring_give_the_same_output() {
    for path in all_files() {
        let pread = index_with("pread", &path);
        let uring = index_with("uring", &path);
        assert_eq!(pread.status.code(), uring.status.code(), "{}", name(&path));
        assert_eq!(pread.stdout, uring.stdout, "{}", name(&path));
        assert_eq!(pread.stderr, uring.stderr, "{}", name(&path));
    }
}

#[test]
fn truncated_file_fails_the_same_way() {
    let path = data("bad-truncated.osm.pbf");
    let uring = index_with("uring", &path);
    let line = refused("uring", &uring, 1, &["blob at offset"]);
    let pread = index_with("pread", &path);
    assert_eq!(line, refused("pread", &pread, 1, &[]));
}

#[test]
fn unknown_io_method_is_a_usage_error() {
    let out = index_with("aio", &data("sorted-andorra.osm.pbf"));
    refused("--io aio", &out, 2, &["'aio'"]);
}
