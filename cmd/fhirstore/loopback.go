package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// isLocalhost reports whether host (without its port) is "localhost" or
// a name under it: RFC 6761 reserves .localhost for the loopback
// interface, so such names never go to DNS (curl and browsers do the same).
func isLocalhost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// loopbackDialer dials *.localhost on the loopback addresses (IPv4 first,
// then IPv6) and any other host as net.Dialer does.
type loopbackDialer struct{ net.Dialer }

// DialContext connects to addr, a host:port.
func (d *loopbackDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !isLocalhost(host) {
		return d.Dialer.DialContext(ctx, network, addr)
	}
	var errs []error
	for _, ip := range []string{"127.0.0.1", "::1"} {
		c, err := d.Dialer.DialContext(ctx, network, net.JoinHostPort(ip, port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("dial %s on loopback: %w", addr, errors.Join(errs...))
}

// localTransport is an HTTP transport that reaches *.localhost hosts on
// loopback, directly (never through a proxy), and keeps up to idle
// connections per host.
func localTransport(idle int) *http.Transport {
	d := &loopbackDialer{Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	return &http.Transport{
		Proxy: func(req *http.Request) (*url.URL, error) {
			if isLocalhost(req.URL.Hostname()) {
				return nil, nil
			}
			return http.ProxyFromEnvironment(req)
		},
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: idle,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}
