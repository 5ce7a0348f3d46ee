//! Filesystems mounted for one test: a small tmpfs (disk full, a read-only
//! directory, another filesystem than the output's) and loop-mounted XFS and
//! btrfs images (clones). Mounting needs root; elsewhere a test says
//! "SKIPPED: reason" and returns.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::data;

/// Whether this process runs as root (the owner of `/proc/self` is its
/// effective user): mount tests skip, with the reason, when not.
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A tmpfs mounted for one test, unmounted (lazily, so a busy mount cannot
/// wedge the test) and removed on drop.
pub struct Mount {
    dir: tempfile::TempDir,
}

impl Mount {
    /// Mount a tmpfs of `size` (e.g. "8m"), or say why it cannot be.
    pub fn tmpfs(size: &str) -> Result<Mount, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount { dir })
    }

    /// [`Mount::tmpfs`], or `None` after printing "SKIPPED: WHAT: reason".
    pub fn tmpfs_or_skip(size: &str, what: &str) -> Option<Mount> {
        Mount::tmpfs(size)
            .inspect_err(|why| eprintln!("SKIPPED: {what}: {why}"))
            .ok()
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Remount read-only.
    pub fn read_only(&self) -> Result<(), String> {
        let out = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.path())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A loop-mounted XFS or btrfs image; unmounted and removed on drop,
/// whatever happened.
pub struct LoopMount {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl LoopMount {
    /// XFS with reflink (xfsprogs), or why not.
    pub fn xfs() -> Result<LoopMount, String> {
        LoopMount::new("mkfs.xfs", &["-q", "-m", "reflink=1"], "xfsprogs")
    }

    /// btrfs (btrfs-progs; the kernel must know btrfs), or why not.
    pub fn btrfs() -> Result<LoopMount, String> {
        let known = std::fs::read_to_string("/proc/filesystems")
            .is_ok_and(|fs| fs.lines().any(|l| l.trim_end().ends_with("btrfs")));
        if !known {
            return Err("the kernel has no btrfs (not in /proc/filesystems)".into());
        }
        LoopMount::new("mkfs.btrfs", &["-q"], "btrfs-progs")
    }

    /// Format a sparse 1 GiB image with `mkfs ARGS` and mount it, or say why not.
    fn new(mkfs: &str, args: &[&str], package: &str) -> Result<LoopMount, String> {
        if !is_root() {
            return Err(format!("loop-mounting a {mkfs} image needs root"));
        }
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let img = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| format!("mount point: {e}"))?;
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(1 << 30))
            .map_err(|e| format!("image: {e}"))?;
        let made = Command::new(mkfs)
            .args(args)
            .arg(&img)
            .output()
            .map_err(|e| format!("{mkfs} not runnable (install {package}): {e}"))?;
        if !made.status.success() {
            return Err(format!(
                "{mkfs} failed: {}",
                String::from_utf8_lossy(&made.stderr).trim()
            ));
        }
        let mount = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt)
            .output()
            .map_err(|e| format!("mount not runnable: {e}"))?;
        if !mount.status.success() {
            return Err(format!(
                "mounting a loop device is not permitted here: {}",
                String::from_utf8_lossy(&mount.stderr).trim()
            ));
        }
        Ok(LoopMount { _dir: dir, mnt })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// Copy a data file onto the mount (sources and output must share it).
    pub fn put(&self, name: &str) -> PathBuf {
        let to = self.mnt.join(name);
        std::fs::copy(data(name), &to).expect("copy onto the mount");
        to
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.mnt)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Busy (a failed assertion left a process?): detach lazily so the
            // loop device is freed when the last user goes.
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        // `_dir` (image and mount point) is removed after this, as a field.
    }
}
