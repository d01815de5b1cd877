package deps

import (
	_ "github.com/asavie/xdp"
	_ "github.com/cilium/ebpf"
	_ "github.com/google/gopacket/pcapgo"
	_ "github.com/vishvananda/netlink"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
)
