//! What a thread that calls the blocking API can do so that it does not slow the shards it
//! calls, on a machine where every CPU runs a shard.
//!
//! A blocking call parks its thread until the shard's reply wakes it. Linux lets a thread that
//! wakes preempt the one running on its CPU, and here that one is a shard: each reply then
//! costs the shard two context switches in the middle of its pass. With eight client threads
//! calling `multi_get` on two shards over two vCPUs, marking the clients `SCHED_BATCH` raised
//! the throughput by a third (`docs/results/issue12-thread-per-core.md`). The clients keep
//! their fair share; they only wait for the shard's pass or its slice to end instead of cutting
//! into it. The policy is the thread's own, so the program decides: ringdb never changes it.

/// Marks the calling thread `SCHED_BATCH` (no privilege needed): its wake-ups no longer
/// preempt the thread running on the CPU it wakes on, a shard where every CPU runs one. For
/// threads that mostly wait on the blocking API; not for latency-sensitive threads, whose
/// wake-ups then wait for the running thread's turn to end (up to a scheduler slice, about
/// 3 ms). The error is the kernel's (`sched_setscheduler`).
pub fn set_caller_thread_batch() -> std::io::Result<()> {
    ringdb_io::affinity::set_current_thread_batch()
}
