// Package afxdp is the kernel-bypass path: AF_XDP sockets, their rings and
// UMEM, a reactor per queue, and a reliable packet transport that also runs
// over a kernel UDP socket and an in-memory link.
//
// The socket layer underneath is internal/xsk (rings, UMEM, frame
// allocator), steered by the program in package xdp; headers are written in
// place with internal/packet.
//
// # Raw echo measurements, and the choice of socket layer
//
// BenchmarkRawEcho (raw_bench_test.go) echoes a 64-byte UDP frame between
// two network namespaces over a 1-queue veth pair, copy mode, the steering
// program attached in generic mode on both ends; the server swaps
// addresses and ports in place and sends the same chunk back. It compares
// internal/xsk (with the server in the same process, "xsk", or re-executed
// as its own process, "xsk-2proc"), asavie/xdp v0.3.3 driven the same way,
// and kernel UDP sockets (Go's netpoller). AF_XDP ends wait by pure
// spinning ("spin"), spinning with sched_yield after 20 µs idle
// ("spin-yield"), spinning 20 µs then poll() ("hybrid"), or poll() at once
// ("poll"). A frame not echoed within 5 ms is sent again ("resends").
// Reproduce with:
//
//	go test ./afxdp -run '^$' -bench 'RawEcho$' -benchtime 1s -count 3
//	go test ./afxdp -run '^$' -bench RawEchoAB -benchtime 400000x
//	go test ./afxdp -run '^$' -bench RawOneWay -benchtime 1s -count 3
//
// Because the load on the machine shifts within a run, sub-benchmarks run
// one after another cannot rank the two libraries; BenchmarkRawEchoAB
// does: each library gets its own veth pair and the client alternates
// between them every 1000 round trips. Two runs at load average 2.4–2.9,
// round trips/s and p50, xsk against asavie:
//
//	spin        160k / 159k   4.2 / 4.1 µs   vs  132k / 149k   5.1 / 4.7 µs
//	spin-yield  119k / 161k   4.3 / 4.2 µs   vs  113k / 144k   4.9 / 4.9 µs
//	hybrid      121k / 142k   4.4 / 4.8 µs   vs  110k / 121k   5.6 / 6.1 µs
//	poll         68k /  69k  13.1 / 12.0 µs  vs   60k /  59k  16.0 / 14.9 µs
//
// xsk wins in every mode and run: 6–21% more round trips, p50 0.6–3 µs
// lower, p99 equal or lower.
//
// The machine has 2 vCPUs, and during these runs it was shared with other
// test runs (load average 9–12). Medians of 3 runs: round trips/s, p50,
// p99.
//
//	xsk spin               5.3k    3.1 µs   0.26 ms  (454 resends)
//	xsk spin-yield         7.9k   46 µs     1.5 ms
//	xsk hybrid              15k   37 µs     0.34 ms
//	xsk poll               100k    7.1 µs  24 µs
//	xsk-2proc spin          12k    3.8 µs   0.20 ms  (243 resends)
//	xsk-2proc poll          73k   10.9 µs  27 µs
//	asavie spin            2.0k    4.6 µs   2.3 ms   (602 resends)
//	asavie spin-yield      8.2k    4.8 µs   1.6 ms
//	asavie hybrid          5.8k   51 µs     2.4 ms
//	asavie poll             41k   10.9 µs  43 µs
//	kernel UDP              38k   12.9 µs  35 µs
//
// Earlier single 2 s runs at load average about 2 gave: xsk spin 275k
// round trips/s (p50 3.2 µs, p99 8.9 µs), xsk spin-yield 279k (3.2 µs,
// 12 µs), xsk hybrid 220k (3.9 µs, 19 µs), xsk poll 58k (17 µs), asavie
// spin 275k (3.2 µs, 8.6 µs), kernel UDP 77–109k (8.7 µs). One-way
// (RawOneWay, 64 frames per kick, load 9–10): 0.29–0.42 Mpps of 64-byte
// frames, 0.12–0.28 Mpps of 1500-byte frames (up to 420 MB/s). Every
// AF_XDP variant allocates nothing per round trip or frame.
//
// What the figures say:
//   - Both socket layers share the kernel's copy-mode path, which sets the
//     floor (about 3 µs per round trip spinning, 3× below kernel UDP);
//     on top of it xsk's cached ring indices, O(1) frame stack and
//     drained kicks are measurably cheaper than asavie's (A/B above).
//   - Pure spinning is fragile on 2 vCPUs: a spinning thread starves the
//     kernel's softirq thread of the same CPU and echoes stall for
//     milliseconds (the resends). Yielding after a short idle spin keeps
//     the spinning latency with none of the stalls when the machine is
//     otherwise idle; under contention, sleeping in poll() wins outright,
//     and AF_XDP in poll() still beats kernel UDP (2.6× here, 1.9× with
//     the server in its own process). The transport's reactors spin
//     20µs after their last work, yielding to other goroutines between
//     polls, then park in Go's netpoller (Options.Spin; see transport.go);
//     pure spinning (Options.Busy) is opt-in.
//   - asavie/xdp cannot be used as the base: its Close never unmaps the
//     rings, so the socket and its queue stay bound until the process
//     exits (a second socket on the queue gets EBUSY; the benchmark has
//     to reuse one pair of its sockets for every mode); it reads and
//     writes the kernel-shared ring indices without atomics; it panics
//     on unexpected sendto errors; its Poll takes milliseconds and
//     returns at once while any transmission is uncompleted (hence its
//     poor hybrid and poll figures); and its free-frame lookup scans
//     every frame. internal/xsk is the socket layer for this package.
package afxdp
