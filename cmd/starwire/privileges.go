package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/starwire/starwire/internal/capabilities"
	"github.com/starwire/starwire/tasks"
)

// privFlags say whether a serving task gives up its privileges once its
// listeners are bound and its AF_XDP sockets attached.
type privFlags struct{ keepCaps bool }

func (p *privFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&p.keepCaps, "keep_caps", false, "keep every capability the task started with; by default, once serving, it keeps only what re-binding AF_XDP after a link flap needs (CAP_NET_RAW, CAP_IPC_LOCK), or nothing without AF_XDP")
}

// drop drops the task's capabilities, saying on stdout which went and
// which stayed; nothing when it has none.
func (p *privFlags) drop(s *tasks.Server, stdout io.Writer) error {
	if p.keepCaps {
		return nil
	}
	var keep []cap.Value
	if s.PeerTransport != "" {
		keep = capabilities.AFXDPRebind
	}
	dropped, err := capabilities.Drop(keep...)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if len(dropped) == 0 {
		return nil
	}
	kept := "none"
	if len(keep) > 0 {
		var names []string
		for _, v := range keep {
			names = append(names, capabilities.Name(v))
		}
		kept = strings.Join(names, ", ") + " (to bind AF_XDP again after a link flap)"
	}
	var notable []string
	for _, name := range dropped {
		switch name {
		case "CAP_BPF", "CAP_NET_ADMIN", "CAP_SYS_ADMIN":
			notable = append(notable, name)
		}
	}
	fmt.Fprintf(stdout, "%s dropped %d capabilities (%s among them); kept %s\n", s.Task(), len(dropped), strings.Join(notable, ", "), kept)
	return nil
}
