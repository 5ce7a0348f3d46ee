//! What a signal that ends a tool must undo beyond its output's files: the
//! progress line it draws on the terminal, and a command it runs in a
//! process group of its own (`--check-cmd`). The process has one handler,
//! [`pbf_output::cleanup`]'s, which removes the temporary files and poisons
//! a stream; this module gives it one duty more ([`on_signal`], run first),
//! so everything stays in one async-signal-safe handler.
//!
//! A progress line this process draws on a terminal
//! ([`clear_line_on_signal`]) is cleared, so Ctrl-C on a pipeline of the
//! tools leaves no stale bar behind, as the driver leaves none.
//!
//! A command the process runs in its own process group ([`spawn_in_group`])
//! is stopped before the process dies: the group gets SIGTERM, then SIGKILL
//! if its leader has not ended within [`GROUP_GRACE_MS`], and the leader is
//! reaped. Nothing the command started goes on writing to the terminal
//! after the process that ran it is gone. Ctrl-Z reaches only the job's
//! group, so while such a command runs, SIGTSTP stops its group with the
//! process ([`on_suspend`]), and the process continues it when it is
//! continued itself (`fg`, `bg`).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, sigaction};
use pbf_output::cleanup::{SIGNALS, run_first_on_signal};

/// The terminal whose line (this process's progress bar) is cleared on a
/// signal, or -1.
static LINE_FD: AtomicI32 = AtomicI32::new(-1);
/// The process group of this process's job: the line is cleared only while
/// it is the terminal's foreground group (in the background the line is the
/// shell's prompt).
static LINE_JOB: AtomicI32 = AtomicI32::new(0);
/// Carriage return, then erase the line: what clears a progress bar, here
/// and wherever a tool writes over its line.
pub const CLEAR_LINE: &str = "\r\x1b[2K";
/// The process group (its leader's pid) to stop on a signal, or 0.
static GROUP: AtomicI32 = AtomicI32::new(0);
/// How long a group's leader is given to end after SIGTERM before the group
/// gets SIGKILL.
pub const GROUP_GRACE_MS: u32 = 1000;

/// This module's duty in the signal handler: stop the registered group,
/// then clear the registered line ([`clear_line_on_signal`]) while its job
/// is the terminal's foreground group. Only async-signal-safe calls.
fn on_signal() {
    stop_group(GROUP.load(Ordering::SeqCst));
    let line = LINE_FD.load(Ordering::SeqCst);
    // SAFETY: tcgetpgrp (an ioctl) and write are async-signal-safe; a
    // static buffer.
    unsafe {
        if line >= 0 && libc::tcgetpgrp(line) == LINE_JOB.load(Ordering::SeqCst) {
            libc::write(line, CLEAR_LINE.as_ptr().cast(), CLEAR_LINE.len());
        }
    }
}

/// SIGTERM to the group led by `leader`, SIGKILL if the leader outlives
/// [`GROUP_GRACE_MS`], and the leader reaped; nothing when `leader` is 0.
/// Only async-signal-safe calls: it runs in the signal handler.
fn stop_group(leader: libc::pid_t) {
    if leader <= 0 {
        return;
    }
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    // SAFETY: kill, waitpid and nanosleep are async-signal-safe; the
    // pointers passed are to our stack or null.
    unsafe {
        libc::kill(-leader, libc::SIGTERM);
        for _ in 0..GROUP_GRACE_MS / 10 {
            if libc::waitpid(leader, ptr::null_mut(), libc::WNOHANG) != 0 {
                return;
            }
            libc::nanosleep(&pause, ptr::null_mut());
        }
        libc::kill(-leader, libc::SIGKILL);
        libc::waitpid(leader, ptr::null_mut(), 0);
    }
}

/// A process group stopped (and its leader reaped) if the process receives
/// one of [`SIGNALS`], and suspended with the process on SIGTSTP; dropping
/// the registration forgets it and restores SIGTSTP's disposition.
#[derive(Debug)]
pub struct GroupRegistration {
    /// SIGTSTP's disposition before ours, where ours was installed.
    suspend: Option<SigAction>,
}

/// Stop the process group that `leader` leads (a child spawned with
/// `process_group(0)`) on a signal, and suspend and continue it with the
/// process; one group at a time. Drop the registration once the child has
/// been waited for.
fn stop_group_on_signal(leader: u32) -> GroupRegistration {
    run_first_on_signal(on_signal);
    GROUP.store(i32::try_from(leader).unwrap_or(0), Ordering::SeqCst);
    let ours = SigAction::new(
        SigHandler::Handler(on_suspend),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only makes async-signal-safe calls.
    let suspend = match unsafe { sigaction(Signal::SIGTSTP, &ours) } {
        // A job that ignores Ctrl-Z (its parent said so) keeps ignoring it.
        Ok(old) if old.handler() == SigHandler::SigIgn => {
            // SAFETY: restoring the disposition we found.
            let _ = unsafe { sigaction(Signal::SIGTSTP, &old) };
            None
        }
        Ok(old) => Some(old),
        Err(_) => None,
    };
    GroupRegistration { suspend }
}

/// The signals the process handles: [`SIGNALS`] and SIGTSTP. A thread that
/// blocks them leaves them to the process's other threads.
pub fn handled_signals() -> SigSet {
    SIGNALS.into_iter().chain([Signal::SIGTSTP]).collect()
}

/// Spawn `cmd` as the leader of a process group of its own and register
/// the group ([`stop_group_on_signal`]) before a signal can find it running
/// but unknown: [`SIGNALS`] and SIGTSTP are held in this thread from before
/// the fork until the group is registered, then delivered to the handlers
/// (the child starts with this thread's mask as it was). The process's
/// other threads must block them too (a progress bar's stall watcher
/// does) or have ended (pbf-copy's bar and its ticker have, when it runs
/// its check).
pub fn spawn_in_group(cmd: &mut Command) -> std::io::Result<(Child, GroupRegistration)> {
    let before = handled_signals().thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
    cmd.process_group(0);
    // SAFETY: pthread_sigmask is async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(move || before.thread_set_mask().map_err(std::io::Error::from));
    }
    let spawned = cmd.spawn().map(|child| {
        let registered = stop_group_on_signal(child.id());
        (child, registered)
    });
    // A signal held meanwhile is handled now, the group known.
    before.thread_set_mask()?;
    spawned
}

impl Drop for GroupRegistration {
    fn drop(&mut self) {
        if let Some(old) = &self.suspend {
            // SAFETY: restoring the disposition we found.
            let _ = unsafe { sigaction(Signal::SIGTSTP, old) };
        }
        GROUP.store(0, Ordering::SeqCst);
    }
}

/// SIGTSTP (Ctrl-Z) while a group is registered: the group, outside the
/// job's process group, is not reached by the terminal's signal. It is sent
/// SIGTSTP, the process stops as the default action would (the signal
/// raised under the default disposition and unblocked here, where it is
/// blocked while this handler runs), and once continued it continues the
/// group. Only async-signal-safe calls.
extern "C" fn on_suspend(sig: libc::c_int) {
    let leader = GROUP.load(Ordering::SeqCst);
    // SAFETY: kill, sigaction, raise and pthread_sigmask are
    // async-signal-safe; every pointer is to our stack or null.
    unsafe {
        if leader > 0 {
            libc::kill(-leader, libc::SIGTSTP);
        }
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        let mut ours: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, &default, &mut ours);
        libc::raise(sig);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        // Stopped here until SIGCONT.
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
        libc::sigaction(sig, &ours, ptr::null_mut());
        if leader > 0 {
            libc::kill(-leader, libc::SIGCONT);
        }
    }
}

/// Clear the line of the terminal `fd` if the process receives one of
/// [`SIGNALS`] while `job` (the process group of its job) is the terminal's
/// foreground group: call it once this process draws its progress bar
/// there, which it does until it exits (a bar's line is never handed back).
pub(crate) fn clear_line_on_signal(fd: BorrowedFd<'_>, job: nix::unistd::Pid) {
    run_first_on_signal(on_signal);
    LINE_JOB.store(job.as_raw(), Ordering::SeqCst);
    LINE_FD.store(fd.as_raw_fd(), Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    /// The `SigBlk` line of a status file under /proc.
    fn blocked(status: &str) -> String {
        let text = std::fs::read_to_string(status).expect("status");
        let line = text.lines().find(|l| l.starts_with("SigBlk:"));
        line.expect("SigBlk").to_owned()
    }

    #[test]
    fn a_group_starts_with_the_mask_this_thread_had_and_gives_it_back() {
        let before = blocked("/proc/thread-self/status");
        // grep itself, not a shell (bash blocks SIGCHLD around its forks),
        // says its mask and its process group (the first of NSpgid's, the
        // one of our PID namespace).
        let mut grep = Command::new("grep");
        grep.args(["-E", "^(NSpgid|SigBlk):", "/proc/self/status"])
            .stdout(Stdio::piped());
        let (child, registered) = spawn_in_group(&mut grep).expect("spawn");
        assert_eq!(blocked("/proc/thread-self/status"), before);
        let leader = child.id().to_string();
        let out = child.wait_with_output().expect("wait");
        drop(registered);
        let said = String::from_utf8(out.stdout).expect("utf-8");
        let (group, mask) = said.split_once('\n').expect("two lines");
        assert_eq!(group.split('\t').nth(1), Some(leader.as_str()), "{said}");
        assert_eq!(mask.trim_end(), before, "{said}");
        assert_eq!(GROUP.load(Ordering::SeqCst), 0);
    }
}
