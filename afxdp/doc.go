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
// internal/xsk, asavie/xdp v0.3.3 driven the same way, and kernel UDP
// sockets (Go's netpoller), each end waiting by pure spinning ("spin"),
// spinning with sched_yield after 20 µs idle ("spin-yield"), spinning 20 µs
// then poll() ("hybrid"), or poll() at once ("poll"). Both ends run in one
// process on the machine's 2 vCPUs. Reproduce with:
//
//	go test ./afxdp -run '^$' -bench RawEcho -benchtime 1s -count 5 -v
//
// Lightly loaded machine (load average about 2; single 2 s runs), round
// trips/s, p50, p99:
//
//	xsk spin          275k   3.2 µs    8.9 µs
//	xsk spin-yield    279k   3.2 µs   12.1 µs
//	xsk hybrid        220k   3.9 µs   19.0 µs
//	xsk poll           58k  17.2 µs   33.3 µs
//	asavie spin       275k   3.2 µs    8.6 µs
//	kernel UDP     77–109k   8.7 µs   16–23 µs
//
// Machine shared with other test runs (load average 8–9, medians of 5 runs;
// a second session at load 5–8, medians of 3, in brackets):
//
//	xsk spin          3.5k [4.9k]   3.6 µs   7.1 ms   (hundreds of resends)
//	xsk spin-yield    7.5k [20k]   50 µs     0.8 ms
//	xsk hybrid         31k [20k]   16 µs      77 µs
//	xsk poll           87k [89k]   10 µs      26 µs
//	asavie spin       2.5k [2.0k]   4.6 µs   9.9 ms   (hundreds of resends)
//	asavie spin-yield 9.2k [4.4k] 112 µs     250 µs
//	asavie hybrid      20k [16k]   50 µs     258 µs
//	asavie poll        45k [41k]   13 µs      69 µs
//	kernel UDP         55k [46k]   13 µs      32 µs
//
// All AF_XDP variants allocate nothing per round trip.
//
// What the figures say:
//   - On the same kernel path both socket layers reach the same spinning
//     latency (about 3 µs, 3× below kernel UDP); the ring layer is not
//     the bottleneck, the kernel's copy-mode transmit and the veth are.
//   - Pure spinning is fragile on 2 vCPUs: a spinning thread starves the
//     kernel's softirq thread of the same CPU and echoes stall for
//     milliseconds (the resends). Yielding after a short idle spin keeps
//     the spinning latency with none of the stalls when the machine is
//     otherwise idle; under contention, sleeping in poll() wins outright.
//     Reactors therefore spin for a short budget, then sleep in poll();
//     pure spinning stays opt-in.
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
