//! Faults: every run here meets something going wrong under it, and must
//! end in a sorted output or in one clean line with nothing left behind
//! (util::failures): a disk that fills or is read-only ([`diskfull`],
//! [`space`]), hostile PBF files and streams ([`hostile`], [`streams`]),
//! inputs that lie ([`trust`]) or are rewritten during the run
//! ([`rewritten`]), and kills at random moments ([`soak`]).

mod diskfull;
mod hostile;
mod rewritten;
mod soak;
mod space;
mod streams;
mod trust;
