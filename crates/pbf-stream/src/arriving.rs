//! A merge op read while it arrives. The merge op of a shuffled file of
//! small blobs lists every blob in one line (580,414 inputs, 101 MB), which
//! pbf-overlap writes only once it has read the whole index, and which
//! pbf-merge must parse before it can start: read whole and then parsed,
//! the parse came after the last byte. Here the line is cut between inputs
//! into pieces as it is read, and a second thread parses each piece (with
//! [`crate::fast`]) while the next one arrives; once the line has ended the
//! reading thread parses the rest of the pieces beside it. When a piece is
//! not in the written form the pieces are joined into the line again and
//! it takes the general path, so the result is what parsing the whole line
//! gives.

use std::io::{BufRead, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};
use crate::fast;
use crate::records::{MergeInput, MergeOp};

/// Bytes of a line read before it is cut into a piece: about 6,000 inputs.
pub(crate) const PIECE: usize = 1 << 20;

/// A piece of a line, shared by the thread that read it (which keeps it
/// for the general path) and the one that parses it.
type Piece = Arc<Vec<u8>>;

/// Pieces to parse, by number.
type ToParse = Mutex<Receiver<(usize, Piece)>>;

/// A line read in pieces.
pub(crate) enum Arrived {
    /// A merge op in the written form, with the time spent parsing it
    /// (added up over the threads).
    Merge(MergeOp, Duration),
    /// The whole line (its newline removed), which was not cut, or not
    /// in the written form: parse it as any other line.
    Line(Vec<u8>),
}

/// Read the rest of a line that starts with `head` (a merge op's start,
/// without the line's end) from `inner`, cut into pieces of about `piece`
/// bytes. `room` is how many more bytes the line may take; past that the
/// line is too long.
pub(crate) fn read<R: BufRead>(
    inner: &mut R,
    head: Vec<u8>,
    piece: usize,
    room: usize,
) -> Result<Arrived, Error> {
    let failed = AtomicBool::new(false);
    let (tx, rx) = channel::<(usize, Piece)>();
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        let helper = s.spawn(|| parse_pieces(&rx, &failed));
        let cut = cut_pieces(inner, head, piece, room, |k, p| {
            // The helper ends only when the pieces do.
            let _ = tx.send((k, p));
        });
        drop(tx);
        let mine = parse_pieces(&rx, &failed);
        let theirs = helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let (pieces, last) = cut?;
        Ok(assemble(pieces, last, mine, theirs))
    })
}

/// Read the line into pieces, each cut after an input and handed to
/// `send` with its number, and the last one: the end of the line.
fn cut_pieces<R: BufRead>(
    inner: &mut R,
    mut cur: Vec<u8>,
    piece: usize,
    room: usize,
    mut send: impl FnMut(usize, Piece),
) -> Result<(Vec<Piece>, Vec<u8>), Error> {
    let mut pieces = Vec::new();
    let mut left = room;
    // Where the piece being read is cut next: a piece with no whole input
    // in it (not the written form) grows by a piece.
    let mut cut_at = piece;
    // Bytes of `cur` already searched for a place to cut.
    let mut searched = 0usize;
    loop {
        let want = cut_at.saturating_sub(cur.len()).max(1).min(left + 1);
        let n = inner
            .by_ref()
            .take(want as u64)
            .read_until(b'\n', &mut cur)?;
        if n > left {
            return Err(Error::new(ErrorKind::LineTooLong));
        }
        left -= n;
        if n == 0 || cur.last() == Some(&b'\n') {
            break;
        }
        if cur.len() < cut_at {
            continue;
        }
        cut_at += piece;
        // Cut after the last whole input: the rest starts the next piece.
        let from = searched.saturating_sub(fast::BETWEEN_INPUTS.len());
        searched = cur.len();
        if let Some(gap) = fast::last_between_inputs(&cur[from..]).map(|g| from + g) {
            (cut_at, searched) = (piece, 0);
            let mut next = Vec::with_capacity(piece + 64 * 1024);
            next.extend_from_slice(&cur[gap + 2..]);
            cur.truncate(gap + 2);
            let done = Arc::new(std::mem::replace(&mut cur, next));
            send(pieces.len(), Arc::clone(&done));
            pieces.push(done);
        }
    }
    while matches!(cur.last(), Some(b'\n' | b'\r')) {
        cur.pop();
    }
    Ok((pieces, cur))
}

/// What a thread parsed of the pieces it took. The thread that takes the
/// first piece appends the pieces that follow it, while it takes them in
/// order, to its `front` (nearly all of them: the other thread parses
/// only once the line has ended), so the op's list is not copied again.
#[derive(Default)]
struct Parsed {
    /// The inputs of pieces `0..taken_front`.
    front: Vec<MergeInput>,
    taken_front: usize,
    /// The other pieces, by number (`None`: not in the written form).
    rest: Vec<(usize, Option<Vec<MergeInput>>)>,
    spent: Duration,
}

/// Parse pieces until there are none left; once a piece is not in the
/// written form (`failed`), the rest are only taken.
fn parse_pieces(rx: &ToParse, failed: &AtomicBool) -> Parsed {
    let mut parsed = Parsed::default();
    loop {
        // A poisoned lock means the other thread panicked: stop taking.
        let next = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        let Ok((k, piece)) = next else { break };
        if failed.load(Ordering::Relaxed) {
            continue;
        }
        let started = Instant::now();
        let ok = match k == parsed.taken_front {
            true => {
                let ok = fast::append_piece(&piece, k == 0, &mut parsed.front);
                parsed.taken_front += usize::from(ok);
                ok
            }
            false => {
                let mut inputs = Vec::new();
                let ok = fast::append_piece(&piece, k == 0, &mut inputs);
                parsed.rest.push((k, ok.then_some(inputs)));
                ok
            }
        };
        parsed.spent += started.elapsed();
        if !ok {
            failed.store(true, Ordering::Relaxed);
        }
    }
    parsed
}

/// The merge op, when every piece and the last one are in the written
/// form; else the whole line.
fn assemble(pieces: Vec<Piece>, last: Vec<u8>, mine: Parsed, theirs: Parsed) -> Arrived {
    if pieces.is_empty() {
        return Arrived::Line(last);
    }
    let started = Instant::now();
    let spent = mine.spent + theirs.spent;
    let (mut base, other) = match mine.taken_front >= theirs.taken_front {
        true => (mine, theirs),
        false => (theirs, mine),
    };
    let mut parts: Vec<Option<Vec<MergeInput>>> = vec![None; pieces.len()];
    for (k, inputs) in base.rest.drain(..).chain(other.rest) {
        parts[k] = inputs;
    }
    let later = &mut parts[base.taken_front..];
    let tail = match later.iter().all(Option::is_some) {
        true => fast::inputs_then_fields(&last),
        false => None,
    };
    let Some((rest, (first, end, elements))) = tail else {
        let bytes = pieces.iter().map(|p| p.len()).sum::<usize>() + last.len();
        let mut line = Vec::with_capacity(bytes);
        for p in &pieces {
            line.extend_from_slice(p);
        }
        line.extend_from_slice(&last);
        return Arrived::Line(line);
    };
    drop(pieces);
    let mut inputs = base.front;
    for part in later.iter_mut().flat_map(Option::take) {
        inputs.extend(part);
    }
    inputs.extend(rest);
    let op = MergeOp {
        inputs,
        first,
        last: end,
        elements,
    };
    Arrived::Merge(op, spent + started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::parse_plan_record;
    use crate::records::PlanRecord;
    use std::io::BufReader;

    /// A line read in pieces of `piece` bytes from a reader that gives
    /// `chunk` bytes at a time, parsed.
    fn arrived(line: &[u8], piece: usize, chunk: usize) -> Result<Option<MergeOp>, ()> {
        let mut with_end = line.to_vec();
        with_end.push(b'\n');
        with_end.extend_from_slice(b"next line\n");
        let mut r = BufReader::with_capacity(chunk, &with_end[..]);
        let head_len = line.len().min(piece);
        let mut head = vec![0; head_len];
        r.read_exact(&mut head).map_err(|_| ())?;
        let got = match read(&mut r, head, piece, usize::MAX / 2).map_err(|_| ())? {
            Arrived::Merge(op, _) => Some(op),
            Arrived::Line(l) => {
                assert_eq!(l, line, "the line comes back whole");
                match parse_plan_record(&l) {
                    Ok(PlanRecord::Merge(op)) => Some(op),
                    _ => None,
                }
            }
        };
        let mut rest = String::new();
        r.read_to_string(&mut rest).map_err(|_| ())?;
        assert_eq!(rest, "next line\n", "nothing past the line is read");
        Ok(got)
    }

    fn whole(line: &[u8]) -> Option<MergeOp> {
        match parse_plan_record(line) {
            Ok(PlanRecord::Merge(op)) => Some(op),
            _ => None,
        }
    }

    #[test]
    fn long_lines_are_too_long_in_pieces_too() {
        let line = fast::tests::written_merge(&fast::tests::sample_op(50));
        let mut r = BufReader::with_capacity(64, &line[..]);
        let mut head = vec![0; 100];
        r.read_exact(&mut head).expect("head");
        let err = read(&mut r, head, 300, line.len() - 200)
            .err()
            .expect("too long");
        assert!(matches!(err.kind(), ErrorKind::LineTooLong), "{err}");
    }

    #[test]
    fn a_line_read_in_pieces_is_parsed_in_pieces() {
        let op = fast::tests::sample_op(200);
        let line = fast::tests::written_merge(&op);
        let mut r = BufReader::with_capacity(100, &line[..]);
        let mut head = vec![0; 500];
        r.read_exact(&mut head).expect("head");
        match read(&mut r, head, 500, usize::MAX / 2).expect("read") {
            Arrived::Merge(got, _) => assert_eq!(got, op),
            Arrived::Line(_) => panic!("not parsed in pieces"),
        }
    }

    proptest::proptest! {
        /// In pieces of any size, from a reader giving any number of
        /// bytes at a time, a merge op line, written or damaged, reads as
        /// the whole line does.
        #[test]
        fn read_in_pieces_as_whole(
            m in fast::tests::merge_op_of(0..40),
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>(), 0..3u8),
                0..3,
            ),
            piece in 20..2000usize,
            chunk in 1..500usize,
        ) {
            let line = fast::tests::damaged(fast::tests::written_merge(&fast::tests::exact(m)), edits);
            // The reader is handed lines without a newline inside.
            proptest::prop_assume!(!line.contains(&b'\n') && !line.ends_with(b"\r"));
            proptest::prop_assert_eq!(arrived(&line, piece, chunk), Ok(whole(&line)));
        }
    }
}
