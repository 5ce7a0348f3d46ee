//! Temporary files must not outlive a process killed by SIGINT, SIGTERM or
//! SIGHUP. A registered path is kept as a C string in a static slot; the
//! signal handler only loads those pointers, calls `unlink(2)` on each (both
//! async-signal-safe) and re-raises the signal with the default disposition,
//! so the process still dies of the signal and its exit status shows it.
//!
//! A stream (`-o -`) cannot be taken back: a registered stream
//! ([`poison_on_signal`]) gets [`crate::STREAM_POISON`] written to it by the
//! same handler (`write(2)` is async-signal-safe), so a reader of
//! `pbf-copy -o - > file` interrupted by Ctrl-C fails on the cut file
//! instead of taking it for a complete one.
//!
//! The layer above gives the same handler one duty more, run first
//! ([`run_first_on_signal`]): pbf-cli stops a command it runs in a process
//! group of its own and clears its progress line, so a process has one
//! handler and every duty in it stays async-signal-safe.
//!
//! What this cannot cover, by design:
//! - SIGKILL (and a power cut) cannot be caught. A named temporary file
//!   stays, but it is never named like the output: it is
//!   `.OUT.pbf-sort.XXXXXX.tmp` (see [`crate::TEMP_MARKER`]), so nobody
//!   mistakes it for a finished file. (An output's temporary file has no
//!   name at all where the filesystem allows it, so nothing stays.)
//! - SIGPIPE stays ignored (Rust's default): a write into a closed pipe fails
//!   with `EPIPE`, which is an ordinary error, and the normal error path
//!   (dropping the [`crate::OutputFile`]) removes the temporary file.
//! - A signal the parent set to "ignore" (e.g. SIGHUP under `nohup`) stays
//!   ignored.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

use crate::error::{Error, Result};

/// The signals that remove registered files before the process dies.
pub const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// How many paths can be registered at once.
const SLOTS: usize = 32;

static PATHS: [AtomicPtr<libc::c_char>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];
/// The stream to poison on a signal, or -1.
static STREAM_FD: AtomicI32 = AtomicI32::new(-1);
/// The duty of the layer above ([`run_first_on_signal`]), a `fn()`, or null.
static DUTY: AtomicPtr<()> = AtomicPtr::new(ptr::null_mut());
/// Set as the handler starts: the process is about to die.
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// Handlers currently running: a slot's string is not freed while one runs.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    let duty = DUTY.load(Ordering::SeqCst);
    if !duty.is_null() {
        // SAFETY: only `run_first_on_signal` stores here, and it stores a
        // `fn()`.
        let duty = unsafe { std::mem::transmute::<*mut (), fn()>(duty) };
        duty();
    }
    for slot in &PATHS {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: `p` came from CString::into_raw and is not freed while
            // IN_HANDLER is non-zero (see `Registration::drop`).
            unsafe { libc::unlink(p) };
        }
    }
    let fd = STREAM_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let poison = crate::STREAM_POISON;
        // SAFETY: write is async-signal-safe; the buffer lives on our stack.
        // A short or failed write (a closed pipe) leaves nothing to do.
        unsafe { libc::write(fd, poison.as_ptr().cast(), poison.len()) };
    }
    // SA_RESETHAND restored the default disposition on entry; the re-raised
    // signal is delivered when the handler returns (or at once), and kills us.
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(sig) };
}

fn install() {
    INSTALL.call_once(|| {
        let ours = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::SA_RESETHAND,
            SigSet::empty(),
        );
        for sig in SIGNALS {
            // SAFETY: the handler only touches atomics and async-signal-safe calls.
            if let Ok(old) = unsafe { sigaction(sig, &ours) } {
                if old.handler() == SigHandler::SigIgn {
                    // SAFETY: restoring the disposition we found.
                    let _ = unsafe { sigaction(sig, &old) };
                }
            }
        }
    });
}

/// The work a signal would undo is done (the output is in place): from now
/// on [`SIGNALS`] are ignored, so the process ends with the status of what
/// it did, not that of a signal that came too late to stop it (a driver
/// would then report a failure and find an output behind).
pub fn ignore_signals() {
    for sig in SIGNALS {
        // SAFETY: ignoring a signal runs no handler.
        let _ = unsafe { nix::sys::signal::signal(sig, SigHandler::SigIgn) };
    }
}

/// A stream that gets [`crate::STREAM_POISON`] written to it if the process
/// receives one of [`SIGNALS`]; dropping the registration forgets it.
#[derive(Debug)]
pub struct StreamRegistration(());

/// Poison `fd` on a signal (one stream at a time: a second registration
/// replaces the first). Register once the first byte went out: a stream that
/// holds nothing needs no poison.
pub fn poison_on_signal(fd: BorrowedFd<'_>) -> StreamRegistration {
    install();
    STREAM_FD.store(fd.as_raw_fd(), Ordering::SeqCst);
    StreamRegistration(())
}

impl Drop for StreamRegistration {
    fn drop(&mut self) {
        STREAM_FD.store(-1, Ordering::SeqCst);
    }
}

/// Have the handler call `duty` first, before it removes the files and
/// poisons the stream, installing the handlers on first use; one duty (a
/// second call replaces the first). `duty` must make only
/// async-signal-safe calls.
pub fn run_first_on_signal(duty: fn()) {
    install();
    DUTY.store(duty as *mut (), Ordering::SeqCst);
}

/// True once one of [`SIGNALS`] reached the handler: the process is about
/// to die, and its other threads should draw nothing more (a progress frame
/// written after the handler cleared the line would stay on the screen).
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// A path that is unlinked if the process receives one of [`SIGNALS`];
/// dropping the registration forgets the path (it does not remove the file).
#[derive(Debug)]
pub struct Registration {
    slot: usize,
}

/// Register `path` for removal on a signal, installing the handlers on first
/// use. Register before creating the file (an unlink of a path that does not
/// exist yet is harmless), so no moment exists in which the file is there
/// but unknown to the handler. Relative paths are made absolute first.
pub fn remove_on_signal(path: &Path) -> Result<Registration> {
    let abs = std::path::absolute(path)
        .map_err(|e| Error::io(format!("{}: absolute path", path.display()), e))?;
    let c = CString::new(abs.as_os_str().as_bytes())
        .map_err(|_| Error::invalid(abs.display().to_string(), "path contains a NUL byte"))?;
    install();
    let raw = c.into_raw();
    for (slot, cell) in PATHS.iter().enumerate() {
        if cell
            .compare_exchange(ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Ok(Registration { slot });
        }
    }
    // SAFETY: `raw` came from into_raw above and was not published.
    drop(unsafe { CString::from_raw(raw) });
    Err(Error::invalid(
        abs.display().to_string(),
        format!("more than {SLOTS} temporary files registered for signal cleanup"),
    ))
}

impl Drop for Registration {
    fn drop(&mut self) {
        let raw = PATHS[self.slot].swap(ptr::null_mut(), Ordering::SeqCst);
        // A handler that loaded the pointer before the swap has already
        // raised IN_HANDLER; it is about to kill the process, so wait.
        while IN_HANDLER.load(Ordering::SeqCst) > 0 {
            std::thread::yield_now();
        }
        if !raw.is_null() {
            // SAFETY: `raw` came from into_raw and is no longer reachable.
            drop(unsafe { CString::from_raw(raw) });
        }
    }
}
