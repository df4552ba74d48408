package main

import (
	"context"
	"net"
	"testing"
)

func TestLocalhostNamesAreLoopback(t *testing.T) {
	for _, c := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"acme.localhost", true},
		{"ACME.Localhost.", true},
		{"a.b.localhost", true},
		{"localhost.example.org", false},
		{"notlocalhost", false},
		{"127.0.0.1", false},
		{"example.org", false},
	} {
		if got := isLocalhost(c.host); got != c.want {
			t.Errorf("isLocalhost(%q) = %v, want %v", c.host, got, c.want)
		}
	}
}

func TestLoopbackDialerReachesAListenerByAnyLocalhostName(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d := &loopbackDialer{}
	for _, host := range []string{"acme.localhost", "deep.name.under.localhost"} {
		c, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("dial %s: %v", host, err)
		}
		if ip := c.RemoteAddr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			t.Errorf("dial %s reached %s, not loopback", host, ip)
		}
		c.Close()
	}
}
