//! How glibc's allocator treats the merge's freed memory. The merge frees
//! and allocates buffers of a few hundred kilobytes to a few megabytes all
//! the time (inflated blobs, decoded columns, encoded blocks). By default
//! glibc hands such blocks back to the kernel as they are freed (`munmap`,
//! or trimming an arena's top), so the next one is faulted in and zeroed
//! page by page again, which costs about half of pbf-merge's system time.
//! Keeping them costs a few megabytes of resident memory (both measured in
//! bench/merge-perf.md).

/// Allocations from this size on get their own mapping, returned when freed.
/// Below it they come from, and go back to, the arenas.
const MMAP_THRESHOLD: usize = 32 << 20;

/// Free memory an arena keeps at its top before giving it back.
const TRIM_THRESHOLD: usize = 64 << 20;

/// Set the thresholds above (an explicit setting also stops glibc from
/// moving them itself). Other C libraries keep their own policy.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::libc::{M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, c_int, mallopt};
        // SAFETY: mallopt only sets allocator parameters; both values fit
        // a c_int and are within glibc's accepted ranges. A refusal (0)
        // would leave glibc's own policy in place: slower, never wrong, so
        // there is nothing to report.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD as c_int);
            mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD as c_int);
        }
    }
}
