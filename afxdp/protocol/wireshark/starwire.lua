-- Wireshark dissector for starwire's packet protocol (afxdp/protocol):
-- the 48-byte packet header of every datagram, an ACK's SACK bitmap as
-- ranges, and the starwire frame headers (package wire) that start the
-- frames inside DATA packets.
--
-- Install: copy this file into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders > Personal Lua Plugins; on Linux
-- ~/.local/lib/wireshark/plugins/), or load it for one run:
--   wireshark -X lua_script:afxdp/protocol/wireshark/starwire.lua capture.pcap
--   tshark -X lua_script:afxdp/protocol/wireshark/starwire.lua -r capture.pcap
-- It finds the protocol on any UDP port by its magic ("XS", version 3);
-- Decode As... > starwire forces it on a port.
--
-- Layouts, little-endian, as afxdp/protocol/header.go and wire/header.go
-- define them (keep them in step):
--   packet: 0 magic u16 | 2 version u8 | 3 type u8 | 4 flags u8 | 5 tx u8 |
--           6 data length u16 | 8 session u64 | 16 packet number u32 |
--           20 message number u32 | 24 ack u32 | 28 window u32 |
--           32 offset u64 | 40 token u64
--   frame:  0 magic u16 ("SW") | 2 version u8 | 3 kind u8 | 4 flags u16 |
--           6 tensors u16 | 8 method u32 | 12 status i32 | 16 call id u64 |
--           24 meta length u32 | 28 descriptor length u32 |
--           32 payload length u64 | 40 timeout u64 (ns)

local HEADER_LEN = 48
local PACKET_MAGIC = 0x5358 -- "XS"
local PACKET_VERSION = 3
local FRAME_MAGIC = 0x5753 -- "SW"
local FRAME_LEN = 48

local types = { [1] = "data", [2] = "ack", [3] = "open", [4] = "close", [5] = "reset" }
local kinds = { [1] = "request", [2] = "response", [3] = "error", [4] = "cancel",
	[5] = "hello", [6] = "ping", [7] = "pong", [8] = "goaway" }

local F_FIRST, F_LAST, F_GAP, F_SIZE, F_SACK, F_PACKED, F_DSACK, F_PROBE = 1, 2, 4, 8, 16, 32, 64, 128

local proto = Proto("starwire", "starwire packet protocol")
local frame_proto = Proto("starwire_frame", "starwire frame")

local f = {
	type = ProtoField.uint8("starwire.type", "Type", base.DEC, types),
	version = ProtoField.uint8("starwire.version", "Version", base.DEC),
	flags = ProtoField.uint8("starwire.flags", "Flags", base.HEX),
	first = ProtoField.bool("starwire.flags.first", "First", 8, nil, F_FIRST),
	last = ProtoField.bool("starwire.flags.last", "Last", 8, nil, F_LAST),
	gap = ProtoField.bool("starwire.flags.gap", "Gap", 8, nil, F_GAP),
	size = ProtoField.bool("starwire.flags.size", "Size", 8, nil, F_SIZE),
	sackf = ProtoField.bool("starwire.flags.sack", "SACK", 8, nil, F_SACK),
	packed = ProtoField.bool("starwire.flags.packed", "Packed", 8, nil, F_PACKED),
	dsack = ProtoField.bool("starwire.flags.dsack", "DSACK", 8, nil, F_DSACK),
	probe = ProtoField.bool("starwire.flags.probe", "Probe", 8, nil, F_PROBE),
	tx = ProtoField.uint8("starwire.tx", "Transmission", base.DEC),
	len = ProtoField.uint16("starwire.len", "Data length", base.DEC),
	session = ProtoField.uint64("starwire.session", "Session", base.HEX),
	seq = ProtoField.uint32("starwire.seq", "Packet number", base.DEC),
	msg = ProtoField.uint32("starwire.msg", "Message number", base.DEC),
	ack = ProtoField.uint32("starwire.ack", "Ack", base.DEC),
	window = ProtoField.uint32("starwire.window", "Window", base.DEC),
	offset = ProtoField.uint64("starwire.offset", "Offset", base.DEC),
	token = ProtoField.uint64("starwire.token", "Token", base.HEX),
	sack = ProtoField.string("starwire.sack", "SACK ranges"),
	data = ProtoField.bytes("starwire.data", "Data"),
	packed_len = ProtoField.uint16("starwire.packed_len", "Packed frame length", base.DEC),
}
proto.fields = f

local ff = {
	kind = ProtoField.uint8("starwire.frame.kind", "Kind", base.DEC, kinds),
	version = ProtoField.uint8("starwire.frame.version", "Version", base.DEC),
	flags = ProtoField.uint16("starwire.frame.flags", "Flags", base.HEX),
	tensors = ProtoField.uint16("starwire.frame.tensors", "Tensors", base.DEC),
	method = ProtoField.uint32("starwire.frame.method", "Method", base.HEX),
	status = ProtoField.int32("starwire.frame.status", "Status", base.DEC),
	call_id = ProtoField.uint64("starwire.frame.call_id", "Call ID", base.DEC),
	meta_len = ProtoField.uint32("starwire.frame.meta_len", "Meta length", base.DEC),
	desc_len = ProtoField.uint32("starwire.frame.desc_len", "Descriptor length", base.DEC),
	payload_len = ProtoField.uint64("starwire.frame.payload_len", "Payload length", base.DEC),
	timeout = ProtoField.uint64("starwire.frame.timeout", "Timeout (ns)", base.DEC),
}
frame_proto.fields = ff

-- sack_ranges turns an ACK's bitmap (bit i: packet ack+1+i held) into
-- "a-b,c" ranges of packet numbers.
local function sack_ranges(tvb, ack)
	local out, start, prev = {}, nil, nil
	for i = 0, tvb:len() - 1 do
		local byte = tvb(i, 1):uint()
		for bit = 0, 7 do
			if bit32.band(byte, bit32.lshift(1, bit)) ~= 0 then
				local n = (ack + 1 + i * 8 + bit) % 4294967296
				if start ~= nil and n == (prev + 1) % 4294967296 then
					prev = n
				else
					if start ~= nil then
						out[#out + 1] = start == prev and tostring(start) or (start .. "-" .. prev)
					end
					start, prev = n, n
				end
			end
		end
	end
	if start ~= nil then
		out[#out + 1] = start == prev and tostring(start) or (start .. "-" .. prev)
	end
	return table.concat(out, ",")
end

-- frame_header adds the starwire frame header at the start of tvb, when
-- it is one, and returns a summary for the info column.
local function frame_header(tvb, tree)
	if tvb:len() < FRAME_LEN or tvb(0, 2):le_uint() ~= FRAME_MAGIC then
		return nil
	end
	local t = tree:add(frame_proto, tvb(0, FRAME_LEN))
	local kind = tvb(3, 1):uint()
	t:add(ff.version, tvb(2, 1))
	t:add(ff.kind, tvb(3, 1))
	t:add_le(ff.flags, tvb(4, 2))
	t:add_le(ff.tensors, tvb(6, 2))
	t:add_le(ff.method, tvb(8, 4))
	t:add_le(ff.status, tvb(12, 4))
	t:add_le(ff.call_id, tvb(16, 8))
	t:add_le(ff.meta_len, tvb(24, 4))
	t:add_le(ff.desc_len, tvb(28, 4))
	t:add_le(ff.payload_len, tvb(32, 8))
	t:add_le(ff.timeout, tvb(40, 8))
	local summary = string.format("%s call %s", kinds[kind] or ("kind " .. kind), tostring(tvb(16, 8):le_uint64()))
	t:append_text(": " .. summary)
	return summary
end

local function dissect(tvb, pinfo, tree)
	if tvb:len() < HEADER_LEN or tvb(0, 2):le_uint() ~= PACKET_MAGIC or tvb(2, 1):uint() ~= PACKET_VERSION then
		return 0
	end
	pinfo.cols.protocol = "starwire"
	local typ = tvb(3, 1):uint()
	local flags = tvb(4, 1):uint()
	local dlen = tvb(6, 2):le_uint()
	local ack = tvb(24, 4):le_uint()
	local t = tree:add(proto, tvb(0, math.min(tvb:len(), HEADER_LEN + dlen)))
	t:add(f.version, tvb(2, 1))
	t:add(f.type, tvb(3, 1))
	local ft = t:add(f.flags, tvb(4, 1))
	for _, fl in ipairs({ f.first, f.last, f.gap, f.size, f.sackf, f.packed, f.dsack, f.probe }) do
		ft:add(fl, tvb(4, 1))
	end
	t:add(f.tx, tvb(5, 1))
	t:add_le(f.len, tvb(6, 2))
	t:add_le(f.session, tvb(8, 8))
	t:add_le(f.seq, tvb(16, 4))
	t:add_le(f.msg, tvb(20, 4))
	t:add_le(f.ack, tvb(24, 4))
	t:add_le(f.window, tvb(28, 4))
	t:add_le(f.offset, tvb(32, 8))
	t:add_le(f.token, tvb(40, 8))

	local info = string.format("%s session %s seq %d ack %d win %d",
		types[typ] or ("type " .. typ), tostring(tvb(8, 8):le_uint64():tohex()), tvb(16, 4):le_uint(), ack, tvb(28, 4):le_uint())
	local avail = math.min(dlen, tvb:len() - HEADER_LEN)
	if avail > 0 then
		local data = tvb(HEADER_LEN, avail)
		if typ == 2 and bit32.band(flags, F_SACK) ~= 0 then
			local ranges = sack_ranges(data:tvb(), ack)
			t:add(f.sack, data, ranges)
			info = info .. " sack " .. ranges
		elseif typ == 1 and bit32.band(flags, F_PACKED) ~= 0 then
			-- Whole small frames, each after its u16 length.
			local off, n = 0, 0
			while off + 2 <= avail do
				local l = data(off, 2):le_uint()
				t:add_le(f.packed_len, data(off, 2))
				if off + 2 + l > avail then break end
				local s = frame_header(data(off + 2, l):tvb(), t)
				if s then info = info .. (n == 0 and " [" or "; ") .. s; n = n + 1 end
				off = off + 2 + l
			end
			if n > 0 then info = info .. "]" end
		elseif typ == 1 and bit32.band(flags, F_FIRST) ~= 0 then
			local s = frame_header(data:tvb(), t)
			if s then info = info .. " [" .. s .. "]" end
			t:add(f.data, data)
		else
			t:add(f.data, data)
		end
	end
	pinfo.cols.info = info
	return tvb:len()
end

proto.dissector = dissect

local function heuristic(tvb, pinfo, tree)
	if tvb:len() < HEADER_LEN or tvb(0, 2):le_uint() ~= PACKET_MAGIC or tvb(2, 1):uint() ~= PACKET_VERSION then
		return false
	end
	local typ = tvb(3, 1):uint()
	if typ < 1 or typ > 5 then
		return false
	end
	dissect(tvb, pinfo, tree)
	return true
end

proto:register_heuristic("udp", heuristic)
DissectorTable.get("udp.port"):add_for_decode_as(proto)
