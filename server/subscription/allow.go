package subscription

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// Setting names the endpoint allow-list in error messages.
const Setting = "--subscription-endpoints (FHIRSTORE_SUBSCRIPTION_ENDPOINTS)"

// AllowList decides which endpoints subscriptions may call: URLs that
// start with one of its prefixes (same scheme and host, path under the
// prefix's path) or, when it has none, loopback addresses only, so that a
// subscription can never make the server call an arbitrary host.
type AllowList struct {
	prefixes []*url.URL
}

// ParseAllowList reads a comma-separated list of absolute http(s) URL
// prefixes; an empty setting allows loopback endpoints only.
func ParseAllowList(setting string) (*AllowList, error) {
	a := &AllowList{}
	for _, p := range strings.Split(setting, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		u, err := absoluteHTTP(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", Setting, p, err)
		}
		a.prefixes = append(a.prefixes, u)
	}
	return a, nil
}

// LoopbackOnly tells whether the list is the default: loopback hosts only.
func (a *AllowList) LoopbackOnly() bool { return len(a.prefixes) == 0 }

// Check returns nil when endpoint may be called, an error saying why not
// otherwise.
func (a *AllowList) Check(endpoint string) error {
	u, err := absoluteHTTP(endpoint)
	if err != nil {
		return err
	}
	if a.LoopbackOnly() {
		if !loopbackHost(u.Hostname()) {
			return fmt.Errorf("endpoint %s is not allowed: only loopback addresses are, unless %s lists it", endpoint, Setting)
		}
		return nil
	}
	for _, p := range a.prefixes {
		if u.Scheme == p.Scheme && strings.EqualFold(u.Host, p.Host) && strings.HasPrefix(u.EscapedPath(), p.EscapedPath()) {
			return nil
		}
	}
	return fmt.Errorf("endpoint %s is not allowed by %s", endpoint, Setting)
}

// absoluteHTTP parses an absolute http or https URL without user info.
func absoluteHTTP(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q is not an absolute http or https URL", s)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return nil, fmt.Errorf("%q carries user info, which endpoints may not", s)
	case u.Fragment != "":
		return nil, fmt.Errorf("%q has a fragment", s)
	}
	return u, nil
}

// loopbackHost tells whether a host name is a loopback address literal or
// localhost (never resolved: a name could point anywhere).
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackDial refuses connections to anything but loopback addresses,
// whatever a name resolved to (the default allow-list).
func loopbackDial(_ context.Context, _, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("connection to %s refused: only loopback endpoints are allowed unless %s lists them", address, Setting)
	}
	return nil
}
