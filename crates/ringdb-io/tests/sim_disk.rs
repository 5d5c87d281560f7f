//! The simulated disk: durability across power cuts, tearing, faults, replay from the seed,
//! and running under the executor.

use ringdb_io::Runtime;
use ringdb_io::{
    Batching, Engine, FileId, IoCompletion, IoError, IoRequest, OpKind, SimDisk, SimFault,
};

/// Pushes `reqs` (all at once, submitted together), then runs the engine until every one has
/// completed; returns the completions in completion order.
fn run(engine: &mut dyn Engine, reqs: &[IoRequest]) -> Vec<IoCompletion> {
    for r in reqs {
        // SAFETY: every buffer the tests pass outlives this call, which reaps every
        // completion before returning.
        unsafe { engine.push(r) }.unwrap();
    }
    let mut out = Vec::new();
    engine.submit(0).unwrap();
    engine.reap(&mut out);
    while out.len() < reqs.len() {
        engine.submit(1).unwrap();
        engine.reap(&mut out);
    }
    assert_eq!(engine.in_flight(), 0);
    out
}

/// Runs one request to completion; returns its result.
fn one(engine: &mut dyn Engine, req: IoRequest) -> i32 {
    run(engine, &[req])[0].result
}

fn write(engine: &mut dyn Engine, file: u32, offset: u64, data: &[u8]) -> i32 {
    let mut buf = data.to_vec();
    one(
        engine,
        IoRequest::write(FileId(file), offset, buf.as_mut_ptr(), buf.len() as u32, 0),
    )
}

fn read(engine: &mut dyn Engine, file: u32, offset: u64, len: usize) -> (i32, Vec<u8>) {
    let mut buf = vec![0xAAu8; len];
    let r = one(
        engine,
        IoRequest::read(FileId(file), offset, buf.as_mut_ptr(), len as u32, 0),
    );
    (r, buf)
}

fn sync(engine: &mut dyn Engine, file: u32) -> i32 {
    one(engine, IoRequest::sync(OpKind::Fdatasync, FileId(file), 0))
}

fn pattern(tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| tag.wrapping_mul(31).wrapping_add(i as u8) | 1)
        .collect()
}

#[test]
fn synced_writes_survive_a_cut() {
    for seed in 0..64 {
        let disk = SimDisk::new(seed, 2);
        let mut e = disk.engine(8);
        let a = pattern(1, 8192);
        assert_eq!(write(&mut *e, 0, 0, &a), 8192);
        assert_eq!(sync(&mut *e, 0), 0);
        assert_eq!(disk.durable_image(0), a);
        // Un-synced afterwards: may or may not survive, never harms the synced bytes.
        assert_eq!(write(&mut *e, 0, 8192, &pattern(2, 4096)), 4096);
        assert_eq!(write(&mut *e, 1, 0, &pattern(3, 4096)), 4096);
        disk.power_cut();
        let img = disk.durable_image(0);
        assert_eq!(&img[..8192], &a[..], "seed {seed}");
        let mut e2 = disk.engine(8);
        let (n, got) = read(&mut *e2, 0, 0, 8192);
        assert_eq!(n, 8192);
        assert_eq!(got, a);
        assert_eq!(disk.len(0), img.len() as u64);
    }
}

/// Un-synced writes: each is dropped, kept, or (one per cut at most) torn at an absolute
/// 512-byte boundary; over many seeds every outcome shows up.
#[test]
fn unsynced_writes_vanish_survive_or_tear_at_512() {
    let (mut drops, mut keeps, mut tears) = (0, 0, 0);
    for seed in 0..200 {
        let disk = SimDisk::new(seed, 1);
        let mut e = disk.engine(16);
        // Disjoint writes, one at an unaligned offset, submitted together.
        let writes: Vec<(u64, Vec<u8>)> = vec![
            (0, pattern(1, 4096)),
            (8192, pattern(2, 4096)),
            (16384 + 100, pattern(3, 3000)),
        ];
        let mut bufs: Vec<Vec<u8>> = writes.iter().map(|(_, d)| d.clone()).collect();
        let reqs: Vec<IoRequest> = writes
            .iter()
            .zip(&mut bufs)
            .map(|((off, _), b)| {
                IoRequest::write(FileId(0), *off, b.as_mut_ptr(), b.len() as u32, *off)
            })
            .collect();
        for c in run(&mut *e, &reqs) {
            assert!(c.result > 0);
        }
        assert!(disk.durable_image(0).is_empty());
        disk.power_cut();
        let st = disk.stats();
        assert_eq!(st.cut_writes_dropped + st.cut_writes_kept, 3);
        drops += (st.cut_writes_dropped > 0) as u32;
        keeps += (st.cut_writes_kept > 0) as u32;
        let img = disk.durable_image(0);
        let mut torn_seen = 0;
        for (off, data) in &writes {
            let off = *off as usize;
            let region: Vec<u8> = (off..off + data.len())
                .map(|i| img.get(i).copied().unwrap_or(0))
                .collect();
            // The region holds a prefix of the write, then zeros (patterns have no zero byte).
            let k = region.iter().take_while(|&&b| b != 0).count();
            assert_eq!(&region[..k], &data[..k], "seed {seed}");
            assert!(region[k..].iter().all(|&b| b == 0), "seed {seed}");
            if k != 0 && k != data.len() {
                torn_seen += 1;
                assert_eq!(
                    (off + k) % 512,
                    0,
                    "seed {seed}: tear off a sector boundary"
                );
                let t = st.last_tear.unwrap();
                assert_eq!((t.offset as usize, t.kept as usize), (off, k));
            }
        }
        assert_eq!(torn_seen, st.cut_writes_torn, "seed {seed}");
        tears += st.cut_writes_torn;
        // After the cut, reads see the durable image.
        let mut e2 = disk.engine(4);
        let (n, got) = read(&mut *e2, 0, 0, img.len().max(1));
        assert_eq!(n as usize, img.len());
        assert_eq!(&got[..img.len()], &img[..]);
    }
    assert!(drops > 0, "no cut dropped a write");
    assert!(keeps > 0, "no cut kept an un-synced write");
    assert!(tears > 0, "no cut tore a write");
}

/// A sync submitted together with a write (so before it completed) does not cover it.
#[test]
fn a_sync_submitted_before_the_write_completed_does_not_cover_it() {
    let mut covered_later = 0;
    for seed in 0..32 {
        let disk = SimDisk::new(seed, 1);
        let mut e = disk.engine(4);
        let mut buf = pattern(7, 4096);
        let w = IoRequest::write(FileId(0), 0, buf.as_mut_ptr(), 4096, 1);
        let s = IoRequest::sync(OpKind::Fsync, FileId(0), 2);
        let out = run(&mut *e, &[w, s]);
        assert!(out.iter().all(|c| c.result >= 0));
        assert!(disk.durable_image(0).is_empty(), "seed {seed}");
        assert_eq!(sync(&mut *e, 0), 0);
        assert_eq!(disk.durable_image(0), buf);
        covered_later += 1;
    }
    assert_eq!(covered_later, 32);
}

#[test]
fn reads_past_the_end_are_short_writes_past_it_zero_fill_nop_is_zero() {
    let disk = SimDisk::new(1, 1);
    let mut e = disk.engine(4);
    assert_eq!(read(&mut *e, 0, 0, 512).0, 0);
    assert_eq!(write(&mut *e, 0, 1000, b"abc"), 3);
    assert_eq!(disk.len(0), 1003);
    let (n, got) = read(&mut *e, 0, 998, 100);
    assert_eq!(n, 5);
    assert_eq!(&got[..5], b"\0\0abc");
    assert_eq!(read(&mut *e, 0, 5000, 10).0, 0);
    assert_eq!(one(&mut *e, IoRequest::nop(9)), 0);
    // set_len: un-synced metadata until a sync.
    disk.set_len(0, 100);
    assert_eq!(disk.len(0), 100);
    assert_eq!(sync(&mut *e, 0), 0);
    assert_eq!(disk.durable_image(0).len(), 100);
    disk.set_len(0, 10);
    let mut dropped = false;
    for seed in 0..32 {
        let d = SimDisk::new(seed, 1);
        d.set_len(0, 4096);
        d.power_cut();
        dropped |= d.len(0) == 0;
    }
    assert!(dropped, "an un-synced set_len never vanished");
}

#[test]
fn the_queue_honours_depth_pending_and_in_flight() {
    let disk = SimDisk::new(3, 1);
    let mut e = disk.engine(3);
    assert_eq!(e.depth(), 3);
    for i in 0..3 {
        // SAFETY: nops carry no buffer.
        unsafe { e.push(&IoRequest::nop(i)) }.unwrap();
    }
    assert_eq!((e.pending(), e.in_flight()), (3, 3));
    // SAFETY: as above.
    assert!(unsafe { e.push(&IoRequest::nop(9)) }.is_err());
    assert_eq!(e.in_flight(), 3);
    e.submit(3).unwrap();
    assert_eq!(e.pending(), 0);
    let mut out = Vec::new();
    assert_eq!(e.reap(&mut out), 3);
    assert_eq!(e.in_flight(), 0);
    let mut ids: Vec<u64> = out.iter().map(|c| c.user_data).collect();
    ids.sort();
    assert_eq!(ids, [0, 1, 2]);
    // SAFETY: a bad file index is refused before anything is queued.
    let bad = unsafe { e.push(&IoRequest::sync(OpKind::Fsync, FileId(5), 0)) };
    assert!(bad.is_err());
    assert_eq!(e.stats().completed, 3);
}

#[test]
fn completions_come_out_of_submission_order() {
    let mut reordered = 0;
    for seed in 0..20 {
        let disk = SimDisk::new(seed, 1);
        let mut e = disk.engine(8);
        let reqs: Vec<IoRequest> = (0..8).map(IoRequest::nop).collect();
        let order: Vec<u64> = run(&mut *e, &reqs).iter().map(|c| c.user_data).collect();
        reordered += (order != (0..8).collect::<Vec<_>>()) as u32;
    }
    assert!(reordered > 10, "only {reordered} of 20 seeds reordered");
}

#[test]
fn faults_fire_on_the_nth_matching_request() {
    let disk = SimDisk::new(5, 2);
    let mut e = disk.engine(4);
    let d = pattern(1, 4096);
    // The third write to file 0 (n = 2) fails; writes to file 1 do not count.
    disk.inject(SimFault::Eio, Some(0), Some(OpKind::Write), 2);
    assert_eq!(write(&mut *e, 0, 0, &d), 4096);
    assert_eq!(write(&mut *e, 1, 0, &d), 4096);
    assert_eq!(read(&mut *e, 0, 0, 10).0, 10);
    assert_eq!(write(&mut *e, 0, 4096, &d), 4096);
    assert_eq!(write(&mut *e, 0, 8192, &d), -libc::EIO);
    assert_eq!(disk.len(0), 8192, "a failed write writes nothing");
    assert_eq!(write(&mut *e, 0, 8192, &d), 4096, "a fault fires once");
    assert_eq!(disk.stats().faults_injected, 1);

    // EIO on a sync: it covers nothing.
    disk.inject(SimFault::Eio, None, Some(OpKind::Fdatasync), 0);
    assert_eq!(sync(&mut *e, 0), -libc::EIO);
    assert!(disk.durable_image(0).is_empty());
    assert_eq!(sync(&mut *e, 0), 0);
    assert_eq!(disk.durable_image(0).len(), 12288);

    // ENOSPC hits writes only, whatever `op` says otherwise; nops are never hit.
    disk.inject(SimFault::Enospc, None, None, 0);
    assert_eq!(one(&mut *e, IoRequest::nop(0)), 0);
    assert_eq!(read(&mut *e, 0, 0, 10).0, 10);
    assert_eq!(sync(&mut *e, 0), 0);
    assert_eq!(write(&mut *e, 1, 4096, &d), -libc::ENOSPC);
    assert_eq!(disk.len(1), 4096);

    // Short read: a multiple of 512 below what was asked.
    for _ in 0..8 {
        disk.inject(SimFault::ShortRead, Some(0), None, 0);
        let (n, got) = read(&mut *e, 0, 0, 4096);
        assert!((0..4096).contains(&n) && n % 512 == 0, "short read of {n}");
        assert_eq!(&got[..n as usize], &d[..n as usize]);
        assert!(got[n as usize..].iter().all(|&b| b == 0xAA));
    }

    // Short write: a 512-multiple prefix is written and reported.
    for i in 0..8u64 {
        disk.inject(SimFault::ShortWrite, Some(1), Some(OpKind::Write), 0);
        let off = 1 << 20 | i << 14;
        let n = write(&mut *e, 1, off, &d);
        assert!(n > 0 && n < 4096 && n % 512 == 0, "short write of {n}");
        assert_eq!(disk.len(1), off + n as u64);
    }
    assert_eq!(disk.stats().faults_injected, 1 + 1 + 1 + 8 + 8);
}

#[test]
fn random_faults_fire_with_their_probability_and_clear() {
    let disk = SimDisk::new(11, 1);
    let mut e = disk.engine(4);
    disk.inject_random(SimFault::Eio, Some(OpKind::Read), 0.5);
    write(&mut *e, 0, 0, &pattern(1, 512));
    let fails = (0..200)
        .filter(|_| read(&mut *e, 0, 0, 512).0 == -libc::EIO)
        .count();
    assert!(
        (50..150).contains(&fails),
        "{fails} of 200 failed at p = 0.5"
    );
    assert_eq!(write(&mut *e, 0, 0, &pattern(1, 512)), 512, "reads only");
    disk.clear_faults();
    assert!((0..50).all(|_| read(&mut *e, 0, 0, 512).0 == 512));
    disk.inject_random(SimFault::Enospc, None, 1.0);
    assert_eq!(write(&mut *e, 0, 0, &pattern(1, 512)), -libc::ENOSPC);
}

#[test]
fn engines_from_before_a_cut_fail_with_eio() {
    let disk = SimDisk::new(2, 1);
    let mut old = disk.engine(4);
    assert_eq!(write(&mut *old, 0, 0, &pattern(1, 1024)), 1024);
    assert_eq!(sync(&mut *old, 0), 0);
    // One request in flight at the cut, at the device or not.
    let mut buf = pattern(2, 512);
    // SAFETY: `buf` outlives the engine's use of it: the request completes below.
    unsafe { old.push(&IoRequest::write(FileId(0), 0, buf.as_mut_ptr(), 512, 1)) }.unwrap();
    disk.power_cut();
    old.submit(1).unwrap();
    let mut out = Vec::new();
    old.reap(&mut out);
    assert_eq!(out[0].result, -libc::EIO);
    assert_eq!(write(&mut *old, 0, 0, &buf), -libc::EIO);
    assert_eq!(read(&mut *old, 0, 0, 512).0, -libc::EIO);
    assert_eq!(sync(&mut *old, 0), -libc::EIO);
    assert_eq!(one(&mut *old, IoRequest::nop(0)), -libc::EIO);
    let mut new = disk.engine(4);
    let (n, got) = read(&mut *new, 0, 0, 1024);
    assert_eq!(n, 1024);
    assert_eq!(
        got,
        pattern(1, 1024),
        "the write in flight at the cut never happened"
    );
}

#[test]
fn flip_bit_corrupts_both_images() {
    let disk = SimDisk::new(4, 1);
    let mut e = disk.engine(2);
    write(&mut *e, 0, 0, &[0u8; 1024]);
    sync(&mut *e, 0);
    disk.flip_bit(0, 700, 3);
    assert_eq!(disk.durable_image(0)[700], 8);
    assert_eq!(read(&mut *e, 0, 700, 1).1, [8]);
    disk.power_cut();
    assert_eq!(disk.durable_image(0)[700], 8);
}

/// A run mixing writes, syncs, reads and random faults across two engines and two cuts:
/// everything it observes.
fn scenario(seed: u64) -> (Vec<(u64, i32)>, Vec<Vec<u8>>, ringdb_io::SimStats) {
    let disk = SimDisk::new(seed, 2);
    disk.inject_random(SimFault::ShortWrite, None, 0.05);
    disk.inject_random(SimFault::Eio, Some(OpKind::Fdatasync), 0.1);
    let mut seen = Vec::new();
    let mut bufs: Vec<Vec<u8>> = (0..16).map(|i| pattern(i as u8, 2048)).collect();
    for round in 0..2u64 {
        let mut e = disk.engine(16);
        for batch in 0..6u64 {
            let reqs: Vec<IoRequest> = bufs
                .iter_mut()
                .enumerate()
                .take(6)
                .map(|(i, b)| {
                    let file = (i % 2) as u32;
                    let ud = round << 32 | batch << 8 | i as u64;
                    match i {
                        5 => IoRequest::sync(OpKind::Fdatasync, FileId(file), ud),
                        4 => IoRequest::read(FileId(file), 0, b.as_mut_ptr(), 2048, ud),
                        _ => {
                            let off = (batch * 7 + i as u64 * 3) % 16 * 1024;
                            IoRequest::write(FileId(file), off, b.as_mut_ptr(), 2048, ud)
                        }
                    }
                })
                .collect();
            seen.extend(run(&mut *e, &reqs).iter().map(|c| (c.user_data, c.result)));
        }
        disk.power_cut();
    }
    let images = (0..2).map(|f| disk.durable_image(f)).collect();
    (seen, images, disk.stats())
}

#[test]
fn the_same_seed_replays_exactly() {
    for seed in [0, 1, 42, 0xDEAD_BEEF] {
        assert_eq!(scenario(seed), scenario(seed), "seed {seed}");
    }
    let outcomes: Vec<_> = (0..4).map(scenario).collect();
    assert!(
        outcomes.windows(2).any(|w| w[0] != w[1]),
        "different seeds gave the same run"
    );
}

/// Write + fdatasync + read through the executor's `Io` handle.
#[test]
fn runs_under_the_executor() {
    for seed in 0..8 {
        let disk = SimDisk::new(seed, 1);
        let mut rt = Runtime::new(disk.engine(8), Batching::Each);
        let io = rt.io();
        let data = pattern(9, 4096);
        let d2 = data.clone();
        let got = rt
            .block_on(async move {
                let (r, _) = io.write(FileId(0), 4096, d2).await;
                assert_eq!(r.unwrap(), 4096);
                io.fsync(FileId(0), true).await.unwrap();
                let (r, buf) = io.read(FileId(0), 4096, vec![0u8; 4096]).await;
                assert_eq!(r.unwrap(), 4096);
                buf
            })
            .unwrap();
        assert_eq!(got, data);
        let img = disk.durable_image(0);
        assert_eq!(img.len(), 8192);
        assert_eq!(&img[4096..], &data[..]);
        assert!(img[..4096].iter().all(|&b| b == 0));

        // Faults surface as errors carrying the errno; concurrent tasks run out of order.
        disk.inject(SimFault::Enospc, None, None, 0);
        let io = rt.io();
        let err = rt
            .block_on(async move { io.write(FileId(0), 0, vec![1u8; 512]).await.0 })
            .unwrap()
            .unwrap_err();
        match err {
            IoError::Op { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENOSPC)),
            other => panic!("expected ENOSPC, got {other}"),
        }
        disk.power_cut();
        let io = rt.io();
        let err = rt
            .block_on(async move { io.fsync(FileId(0), false).await })
            .unwrap()
            .unwrap_err();
        match err {
            IoError::Op { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
            other => panic!("expected EIO, got {other}"),
        }
    }
}

#[test]
fn many_tasks_under_the_executor_complete() {
    let disk = SimDisk::new(77, 1);
    let mut rt = Runtime::new(disk.engine(4), Batching::Adaptive);
    let io = rt.io();
    let handles: Vec<_> = (0..32u64)
        .map(|i| {
            let io = io.clone();
            rt.spawn(async move {
                let (r, _) = io.write(FileId(0), i * 512, vec![i as u8 + 1; 512]).await;
                r.unwrap();
            })
        })
        .collect();
    rt.run().unwrap();
    assert!(handles.iter().all(|h| h.is_finished()));
    let mut e = disk.engine(1);
    let (n, got) = read(&mut *e, 0, 0, 32 * 512);
    assert_eq!(n, 32 * 512);
    for i in 0..32 {
        assert!(got[i * 512..(i + 1) * 512]
            .iter()
            .all(|&b| b == i as u8 + 1));
    }
}

/// A direct file refuses what the kernel refuses (`EINVAL`, nothing moved): a buffer, offset
/// or length off its alignment; reads past the end are short, as on a real file.
#[test]
fn a_direct_file_refuses_misaligned_requests_as_the_kernel_does() {
    use ringdb_io::AlignedBuf;
    let disk = SimDisk::new(21, 2);
    disk.set_direct(0, 4096);
    let mut e = disk.engine(4);
    let mut page = AlignedBuf::new(8192);
    page.as_mut_slice().copy_from_slice(&pattern(3, 8192));
    let ptr = page.as_mut_ptr();
    let w = |off, buf, len| IoRequest::write(FileId(0), off, buf, len, 0);
    assert_eq!(one(&mut *e, w(0, ptr, 8192)), 8192, "aligned: accepted");
    // SAFETY: `page` holds 8192 bytes, so `ptr + 512` is in bounds with 4096 bytes after it.
    let off_ptr = unsafe { ptr.add(512) };
    assert_eq!(one(&mut *e, w(0, off_ptr, 4096)), -libc::EINVAL, "buffer");
    assert_eq!(one(&mut *e, w(512, ptr, 4096)), -libc::EINVAL, "offset");
    assert_eq!(one(&mut *e, w(0, ptr, 1024)), -libc::EINVAL, "length");
    let r = |off, buf, len| IoRequest::read(FileId(0), off, buf, len, 0);
    assert_eq!(
        one(&mut *e, r(0, off_ptr, 4096)),
        -libc::EINVAL,
        "read buffer"
    );
    assert_eq!(
        one(&mut *e, r(100, ptr, 4096)),
        -libc::EINVAL,
        "read offset"
    );
    assert_eq!(disk.stats().direct_refused, 5);
    assert_eq!(disk.len(0), 8192, "nothing refused reached the file");
    // Past the end: short, then nothing.
    assert_eq!(one(&mut *e, r(4096, ptr, 8192)), 4096);
    assert_eq!(one(&mut *e, r(8192, ptr, 4096)), 0);
    // A file that is not direct takes any buffer (a Vec's), and the mark survives a cut.
    assert_eq!(write(&mut *e, 1, 3, &pattern(4, 100)), 100);
    disk.power_cut();
    let mut e = disk.engine(4);
    assert_eq!(one(&mut *e, r(100, ptr, 4096)), -libc::EINVAL);
    let n = read(&mut *e, 1, 0, 7).0;
    assert!(
        n == 0 || n == 7,
        "file 1 takes a Vec (the write kept or dropped): {n}"
    );
}

#[test]
fn an_engine_over_some_files_sees_only_them_and_one_cut_hits_all() {
    let sim = SimDisk::new(11, 4);
    let mut low = sim.engine_over(8, &[0, 1]);
    let mut high = sim.engine_over(8, &[2, 3]);
    assert_eq!(write(&mut *high, 0, 0, b"on file two"), 11);
    assert_eq!(sync(&mut *high, 0), 0);
    assert_eq!(write(&mut *low, 1, 0, b"on file one"), 11);
    assert_eq!(sim.volatile_image(2), b"on file two");
    assert_eq!(sim.volatile_image(1), b"on file one");
    assert!(
        sim.volatile_image(0).is_empty(),
        "FileId(0) of `high` is file 2"
    );
    let mut buf = [0u8; 4];
    let refused = IoRequest::read(FileId(2), 0, buf.as_mut_ptr(), 4, 0);
    // SAFETY: the push is refused; nothing is queued.
    assert!(matches!(
        unsafe { high.push(&refused) },
        Err(IoError::NoSuchFile { index: 2, files: 2 })
    ));
    sim.power_cut();
    assert_eq!(
        sim.durable_image(2),
        b"on file two",
        "synced through `high`"
    );
    assert_eq!(
        write(&mut *low, 0, 0, b"x"),
        -libc::EIO,
        "every engine is dead"
    );
    assert_eq!(write(&mut *high, 1, 0, b"x"), -libc::EIO);
}

#[test]
fn a_blocking_file_follows_the_durability_model_and_dies_with_the_power() {
    use ringdb_io::BlockingFile;
    for seed in 0..32 {
        let sim = SimDisk::new(seed, 1);
        let file = sim.blocking_file(0);
        file.write_all_at(b"synced.", 0).unwrap();
        file.sync_data().unwrap();
        file.write_all_at(&pattern(3, 2048), 7).unwrap();
        assert_eq!(
            file.read_all().unwrap().len(),
            2055,
            "reads see the volatile image"
        );
        assert_eq!(sim.unsynced_writes(0), 1);
        sim.power_cut();
        let err = file.write_all_at(b"late", 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "seed {seed}");
        assert_eq!(
            file.sync_data().unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        let after = sim.blocking_file(0).read_all().unwrap();
        assert_eq!(
            &after[..7],
            b"synced.",
            "seed {seed}: the synced write survived"
        );
        assert!(
            after.len() == 7 || after.len() >= 512,
            "seed {seed}: torn at 512 or whole"
        );
        let kept = &after[7..];
        assert_eq!(
            kept,
            &pattern(3, 2048)[..kept.len()],
            "seed {seed}: a prefix"
        );
    }
}

#[test]
fn a_cut_after_the_nth_write_or_sync_comes_right_after_it() {
    use ringdb_io::BlockingFile;
    let sim = SimDisk::new(5, 2);
    sim.cut_after(1, OpKind::Write, 2);
    let file = sim.blocking_file(1);
    let mut engine = sim.engine(8);
    assert_eq!(
        write(&mut *engine, 1, 0, b"first"),
        5,
        "an engine write counts"
    );
    assert_eq!(
        write(&mut *engine, 0, 0, b"other file"),
        10,
        "another file does not"
    );
    file.write_all_at(b"second", 5).unwrap();
    assert_eq!(sim.stats().power_cuts, 0);
    file.write_all_at(b"third", 11).unwrap(); // the cut comes right after it
    let stats = sim.stats();
    assert_eq!((stats.power_cuts, stats.cuts_triggered), (1, 1));
    assert!(file.sync_data().is_err(), "nothing syncs after the cut");
    // A sync that triggers the cut is durable.
    let sim = SimDisk::new(6, 1);
    sim.cut_after(0, OpKind::Fdatasync, 0);
    let file = sim.blocking_file(0);
    file.write_all_at(b"kept", 0).unwrap();
    file.sync_all().unwrap(); // fsync counts as a sync
    assert_eq!(sim.stats().cuts_triggered, 1);
    assert_eq!(sim.durable_image(0), b"kept");
}
