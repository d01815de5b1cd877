package link

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// A linkWatch follows the kernel's link notifications for one interface
// and records when it goes down or away. A removed interface unbinds its
// AF_XDP sockets without a word to a reactor that is only receiving, and
// one that sends sees only failed kicks: without the watch its sessions
// lasted until Options.DeadAfter, and calls waited for them.
type linkWatch struct {
	ifindex int
	why     atomic.Pointer[string] // set once the interface is unusable
	file    *os.File               // the netlink socket, read in Go's netpoller
	done    chan struct{}
}

// watchLink subscribes, in the calling thread's network namespace, to the
// link notifications of the interface with index ifindex; onDown runs
// once, on the watch's goroutine, when it goes down or is removed.
func watchLink(ifindex int, onDown func()) (*linkWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("afxdp: link watch: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("afxdp: link watch: bind: %w", err)
	}
	w := &linkWatch{ifindex: ifindex, file: os.NewFile(uintptr(fd), "afxdp-linkwatch"), done: make(chan struct{})}
	go w.run(onDown)
	return w, nil
}

// Down reports whether the interface went down or away, and why.
func (w *linkWatch) Down() (bool, string) {
	if why := w.why.Load(); why != nil {
		return true, *why
	}
	return false, ""
}

func (w *linkWatch) run(onDown func()) {
	defer close(w.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := w.file.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			continue // notifications were lost; later ones still count
		}
		if err != nil {
			return // closed
		}
		if why := w.verdict(buf[:n]); why != "" && w.why.CompareAndSwap(nil, &why) {
			onDown()
		}
	}
}

// verdict reads a batch of notifications and says why the interface is
// unusable, or "" when none says so.
func (w *linkWatch) verdict(b []byte) string {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return ""
	}
	for _, m := range msgs {
		if len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		info := nl.DeserializeIfInfomsg(m.Data)
		if int(info.Index) != w.ifindex {
			continue
		}
		switch {
		case m.Header.Type == unix.RTM_DELLINK:
			return "interface removed"
		case m.Header.Type == unix.RTM_NEWLINK && info.Flags&unix.IFF_UP == 0:
			return "interface down"
		}
	}
	return ""
}

// close stops the watch and waits for its goroutine.
func (w *linkWatch) close() error {
	err := w.file.Close()
	<-w.done
	return err
}
