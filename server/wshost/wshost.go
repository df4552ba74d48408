// Package wshost lets websocket clients that send two Host headers reach
// the server's websocket endpoint.
//
// Some websocket clients write a Host header of their own (the address
// they dial) and then the headers their caller gives, which may name the
// host again: the tenant's name, when the client dials an address. Go's
// HTTP server refuses any request with two Host headers (400) before a
// handler sees it. Listener keeps, in the opening request of a
// connection that asks to upgrade to a websocket on the given path, only
// the last Host header; every other request is read as it was sent.
package wshost

import (
	"bufio"
	"bytes"
	"net"
	"sync"
)

// maxHead bounds the opening request head Listener looks at.
const maxHead = 16 << 10

// Listener wraps ln so that the opening websocket upgrade request of a
// connection to path keeps only its last Host header.
func Listener(ln net.Listener, path string) net.Listener {
	return &listener{Listener: ln, prefix: []byte("GET " + path)}
}

type listener struct {
	net.Listener
	prefix []byte
}

// Accept wraps each connection; its first read looks at the request head.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, prefix: l.prefix}, nil
}

type conn struct {
	net.Conn
	prefix []byte
	once   sync.Once
	r      *bufio.Reader
	head   []byte // the rewritten head, served before the rest
	err    error
}

// Read serves the opening request head (rewritten when it is a websocket
// upgrade with several Host headers), then the connection as it is.
func (c *conn) Read(p []byte) (int, error) {
	c.once.Do(c.readHead)
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	if c.err != nil {
		err := c.err
		c.err = nil
		return 0, err
	}
	return c.r.Read(p)
}

// readHead reads the opening request head when the connection starts
// with a GET of the websocket path; anything else is left unread.
func (c *conn) readHead() {
	c.r = bufio.NewReaderSize(c.Conn, 4096)
	if _, err := c.r.Peek(1); err != nil {
		return
	}
	// What arrived first decides, so that a short request never waits for
	// bytes that are not coming.
	n := min(c.r.Buffered(), len(c.prefix))
	if seen, _ := c.r.Peek(n); !bytes.Equal(seen, c.prefix[:n]) {
		return // not the websocket path: read as sent
	}
	if start, err := c.r.Peek(len(c.prefix)); err != nil || !bytes.Equal(start, c.prefix) {
		return
	}
	var head []byte
	for len(head) < maxHead {
		line, err := c.r.ReadSlice('\n')
		head = append(head, line...)
		if err != nil && err != bufio.ErrBufferFull {
			c.head, c.err = head, err
			return
		}
		if bytes.Equal(line, []byte("\r\n")) || bytes.Equal(line, []byte("\n")) {
			break
		}
	}
	c.head = lastHost(head)
}

// lastHost drops every Host header of an upgrade request head but the
// last; other heads are returned as they are.
func lastHost(head []byte) []byte {
	lines := bytes.SplitAfter(head, []byte("\n"))
	hosts, upgrade := 0, false
	for _, l := range lines {
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		switch string(bytes.ToLower(bytes.TrimSpace(name))) {
		case "host":
			hosts++
		case "upgrade":
			upgrade = upgrade || bytes.EqualFold(bytes.TrimSpace(value), []byte("websocket"))
		}
	}
	if hosts < 2 || !upgrade {
		return head
	}
	out := make([]byte, 0, len(head))
	for _, l := range lines {
		if name, _, ok := bytes.Cut(l, []byte(":")); ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("host")) {
			if hosts--; hosts > 0 {
				continue
			}
		}
		out = append(out, l...)
	}
	return out
}
