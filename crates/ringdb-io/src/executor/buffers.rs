//! The memory an I/O moves: [`IoBuf`], passed by value into the runtime for the I/O's
//! duration, so that the runtime, not the caller, owns it while the kernel may write into it.
//! A buffer returns to the caller with the I/O's result; a buffer whose future is dropped
//! early waits in the request's slot for the completion (`slots.rs`).

use crate::buf::AlignedBuf;

/// Memory an I/O can read into or write from, passed by value to the runtime for the I/O's
/// duration.
///
/// # Safety
/// Implementors promise that:
/// - `stable_ptr` returns a pointer valid for reads and writes of `bytes_len` bytes, and every
///   call returns the same pointer and length while the value lives, even if the value itself
///   is moved (the memory must be on the heap or otherwise not inside the value);
/// - that memory stays allocated for as long as the value lives, and is not freed or reused
///   before the value is dropped;
/// - nothing but the value's owner accesses that memory: while the runtime holds the value (an
///   I/O is in flight) the kernel may write into it at any time.
///
/// The runtime, in turn, drops the value only after the I/O's completion has been reaped.
/// `fixed_index` is a hint: the runtime uses it only when the memory lies inside the runtime's
/// own registered buffer with that index, and otherwise issues a plain read or write.
pub unsafe trait IoBuf: 'static {
    /// The start of the memory; the same pointer on every call while the value lives.
    fn stable_ptr(&mut self) -> *mut u8;
    /// How many bytes the memory holds (and one I/O on it moves).
    fn bytes_len(&self) -> usize;
    /// Registration index when the memory lies in the runtime's registered pool.
    fn fixed_index(&self) -> Option<u16> {
        None
    }
}

// SAFETY: AlignedBuf owns a heap allocation of `len()` bytes that does not move when the value
// moves and is freed only in its Drop.
unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: a Vec's heap buffer does not move when the Vec moves, and the runtime never resizes
// it; `len()` bytes are initialised and owned by the Vec. (For O_DIRECT use AlignedBuf.)
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}
