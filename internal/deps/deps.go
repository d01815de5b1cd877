package deps
import (
	_ "github.com/cilium/ebpf"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/protobuf/proto"
	_ "google.golang.org/grpc"
	_ "github.com/google/gopacket/pcapgo"
	_ "github.com/vishvananda/netlink"
	_ "github.com/asavie/xdp"
)
