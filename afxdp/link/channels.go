package link

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels.
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// ifreqData is struct ifreq with a pointer in its union, as SIOCETHTOOL
// takes it.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// rxQueuesInUse returns how many of the allocated receive queues of
// ifname the kernel uses: its receive and combined channels, as ethtool
// reports them in the calling thread's namespace. A veth made without a
// queue count allocates one queue per CPU and uses one; binding a socket
// to another fails. (/sys/class/net would tell too, but shows the
// namespace sysfs was mounted in, not the calling thread's.) Drivers that
// do not report channels use all they allocated.
func rxQueuesInUse(ifname string, allocated int) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return allocated
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	req := ifreqData{data: unsafe.Pointer(&ch)}
	copy(req.name[:unix.IFNAMSIZ-1], ifname)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(&ch)
	n := int(ch.rxCount + ch.combinedCount)
	if errno != 0 || n <= 0 || (allocated > 0 && n > allocated) {
		return allocated
	}
	return n
}
