//! A software prefetch hint, for loops that read records scattered over
//! memory in an order the hardware prefetcher cannot follow: the merge's
//! order entries of hundreds of streams, and the encoder's objects of as
//! many decoded blobs.

/// Hint the CPU to load `value` into its caches. A prefetch never faults
/// and changes no data; on other architectures this does nothing.
#[inline]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(value).cast::<i8>();
        let last = size_of::<T>().saturating_sub(1);
        for offset in (0..last).step_by(64).chain([last]) {
            // SAFETY: SSE, which `prefetch` needs, is part of every x86_64
            // CPU; a prefetch reads no memory architecturally and never
            // faults, and the addresses lie inside `value` anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
