package xdp

import (
	"encoding/binary"

	"github.com/cilium/ebpf/asm"
)

// Offsets into struct xdp_md, the program's context.
const (
	ctxData       = 0
	ctxDataEnd    = 4
	ctxRxQueueIdx = 16
)

// Verdicts (enum xdp_action).
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// Config array slots.
const (
	cfgAllowlist = 0 // non-zero: drop starwire-port packets from peers not in the allow map
	numConfig    = 1
)

// Header offsets in an Ethernet frame carrying IPv4.
const (
	ethLen      = 14
	ipVerIHL    = ethLen + 0
	ipFragOff   = ethLen + 6
	ipProto     = ethLen + 9
	ipSrc       = ethLen + 12
	ipMinLen    = 20
	udpLen      = 8
	protoUDP    = 17
	ipv4MinEnd  = ethLen + ipMinLen
	udpDstPort  = 2
	stackPort   = -2  // ports map key, 2 bytes
	stackConfig = -8  // config map key, 4 bytes
	stackSrc    = -12 // allow map key, 4 bytes
	stackCount  = -16 // counters map key, 4 bytes
)

// wire16 returns the value a 16-bit load of the big-endian bytes of v
// yields on this host, so comparisons need no byte swap at run time.
func wire16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// count increments counter idx on this CPU and falls through to the next
// instruction, which must carry the symbol next. R0-R5 are clobbered.
func count(idx Counter, sym, next string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, stackCount, int64(idx), asm.Word).WithSymbol(sym),
		asm.LoadMapPtr(asm.R1, 0).WithReference(mapCounters),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackCount),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, next),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	}
}

// lookup calls bpf_map_lookup_elem(m, fp+off); R0 is the value pointer or 0.
func lookup(m string, off int32) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, 0).WithReference(m),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, off),
		asm.FnMapLookupElem.Call(),
	}
}

// exit counts idx and returns verdict (or R7 when verdict is negative).
func exit(name string, idx Counter, verdict int32) asm.Instructions {
	ret := asm.Mov.Imm(asm.R0, verdict)
	if verdict < 0 {
		ret = asm.Mov.Reg(asm.R0, asm.R7)
	}
	insns := count(idx, name, name+"_ret")
	return append(insns, ret.WithSymbol(name+"_ret"), asm.Return())
}

// instructions is the steering program. Registers: R6 context, R2/R3
// packet start/end, R4 UDP header, R5 IPv4 header length, R8 source
// address (network order), R7 scratch and the redirect verdict.
//
// Every packet access is preceded by a comparison against data_end of a
// pointer derived from the same base, which is what the verifier needs;
// the IPv4 header length is masked and shifted into [20, 60] before it
// moves the UDP pointer.
//
// loss is the injected loss (Options.Loss) as a threshold on a random
// u32, an immediate fixed at load: at zero, the program every product
// path loads, the impairment instructions are not emitted at all, so a
// steered packet costs no random draw and no lookup for it.
func instructions(loss uint32) asm.Instructions {
	var p asm.Instructions
	add := func(is ...asm.Instruction) { p = append(p, is...) }
	addAll := func(is asm.Instructions) { p = append(p, is...) }

	add(
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, ctxData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, ctxDataEnd, asm.Word),

		// Ethernet: runts are malformed, anything but IPv4 is not ours.
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ethLen),
		asm.JGT.Reg(asm.R4, asm.R3, "malformed"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
		asm.JNE.Imm(asm.R5, wire16(0x0800), "pass"),

		// IPv4 fixed header.
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ipv4MinEnd),
		asm.JGT.Reg(asm.R4, asm.R3, "malformed"),
		asm.LoadMem(asm.R5, asm.R2, ipVerIHL, asm.Byte),
		asm.Mov.Reg(asm.R7, asm.R5),
		asm.And.Imm(asm.R7, 0xf0),
		asm.JNE.Imm(asm.R7, 0x40, "malformed"),
		asm.And.Imm(asm.R5, 0x0f),
		asm.JLT.Imm(asm.R5, 5, "malformed"),
		asm.LSh.Imm(asm.R5, 2),
		asm.LoadMem(asm.R7, asm.R2, ipProto, asm.Byte),
		asm.JNE.Imm(asm.R7, protoUDP, "pass"),
		// Fragments carry no UDP header (or not all of it): the kernel reassembles.
		asm.LoadMem(asm.R7, asm.R2, ipFragOff, asm.Half),
		asm.And.Imm(asm.R7, wire16(0x3fff)),
		asm.JNE.Imm(asm.R7, 0, "pass"),
		asm.LoadMem(asm.R8, asm.R2, ipSrc, asm.Word),

		// UDP header after the IPv4 options.
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Reg(asm.R4, asm.R5),
		asm.Add.Imm(asm.R4, ethLen),
		asm.Mov.Reg(asm.R7, asm.R4),
		asm.Add.Imm(asm.R7, udpLen),
		asm.JGT.Reg(asm.R7, asm.R3, "malformed"),
		asm.LoadMem(asm.R7, asm.R4, udpDstPort, asm.Half),
		asm.StoreMem(asm.RFP, stackPort, asm.R7, asm.Half),
	)
	addAll(lookup(mapPorts, stackPort))
	add(
		asm.JEq.Imm(asm.R0, 0, "pass"),

		// Allowlist.
		asm.StoreImm(asm.RFP, stackConfig, cfgAllowlist, asm.Word),
	)
	allowed := "redirect"
	if loss > 0 {
		allowed = "impair"
	}
	addAll(lookup(mapConfig, stackConfig))
	add(
		asm.JEq.Imm(asm.R0, 0, allowed),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R1, 0, allowed),
		asm.StoreMem(asm.RFP, stackSrc, asm.R8, asm.Word),
	)
	addAll(lookup(mapAllow, stackSrc))
	add(asm.JEq.Imm(asm.R0, 0, "not_allowed"))
	if loss > 0 {
		// Injected loss, for tests of the reliable transport.
		add(
			asm.FnGetPrandomU32.Call().WithSymbol("impair"),
			asm.LoadImm(asm.R7, int64(loss), asm.DWord),
			asm.JLT.Reg(asm.R0, asm.R7, "impaired"),
		)
	}
	add(
		// To the socket of this RX queue, or to the kernel when there is none.
		asm.LoadMapPtr(asm.R1, 0).WithReference(mapXSKs).WithSymbol("redirect"),
		asm.LoadMem(asm.R2, asm.R6, ctxRxQueueIdx, asm.Word),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.JNE.Imm(asm.R7, xdpRedirect, "no_socket"),
	)
	addAll(exit("redirected", CounterRedirected, -1))
	addAll(count(CounterNoSocket, "no_socket", "pass"))
	addAll(exit("pass", CounterPassed, xdpPass))
	addAll(exit("malformed", CounterMalformed, xdpPass))
	addAll(exit("not_allowed", CounterNotAllowed, xdpDrop))
	if loss > 0 {
		addAll(exit("impaired", CounterImpaired, xdpDrop))
	}
	return p
}
