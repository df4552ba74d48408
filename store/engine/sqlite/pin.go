package sqlite

import (
	"modernc.org/libc"
	"modernc.org/libc/sys/types"
)

// SQLite allocates large scratch buffers for a moment (a B-tree page split
// takes tens of kilobytes). The allocator of modernc.org/libc returns an
// emptied page of a size class to the system at once, so a class nothing
// else uses is mapped and unmapped at every split: two system calls that
// cost more than the split. An Engine holds one block of each large class
// while it is open, which keeps those pages mapped.

// pinned holds one block of each large allocator size class.
type pinned struct {
	tls    *libc.TLS
	blocks []uintptr
}

// pinClasses are the size classes pinned: 4 KiB to 256 KiB.
const (
	pinFrom = 12
	pinTo   = 18
)

func pin() *pinned {
	p := &pinned{tls: libc.NewTLS()}
	for log := pinFrom; log <= pinTo; log++ {
		if b := libc.Xmalloc(p.tls, types.Size_t(1<<log-64)); b != 0 {
			p.blocks = append(p.blocks, b)
		}
	}
	return p
}

// release frees the blocks.
func (p *pinned) release() {
	for _, b := range p.blocks {
		libc.Xfree(p.tls, b)
	}
	p.blocks = nil
	p.tls.Close()
}
