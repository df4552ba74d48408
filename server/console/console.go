// Package console is the web console served at /console/: a few static
// files embedded in the binary (HTML, CSS and hand-written JavaScript that
// talks to the FHIR API with the user's bearer token) and a small JSON API
// for what FHIR has no single call for (per-type counts, server facts).
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

// apiPrefix is where the console's JSON API lives, under Prefix.
const apiPrefix = Prefix + "api/"

// CSP is the Content-Security-Policy of every console response: scripts,
// styles and fetches from the console's own origin only, no inline script
// or style, no plugins, no framing, and forms that cannot post elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'none'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

//go:embed static
var staticFS embed.FS

// Session is the authenticated caller of a console API request.
type Session struct {
	Tenant    string
	Principal *auth.Principal
}

// Options configures the console.
type Options struct {
	// Store answers the counts of the home page.
	Store *store.Store
	// Registry knows the search parameters; nil leaves counts and
	// reference look-ups empty.
	Registry *search.Registry
	// Version is the server's version, shown on the home page.
	Version string
	// Session returns the authenticated caller of an API request; the
	// server authenticates /console/api/ before the console sees it.
	Session func(r *http.Request) (Session, bool)
	// Logger receives errors of the API.
	Logger *zap.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Console serves the console's files and API.
type Console struct {
	opts    Options
	started time.Time
	files   map[string]asset
}

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// New loads the embedded files; the server's start time is now.
func New(opts Options) (*Console, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	files, err := loadAssets()
	if err != nil {
		return nil, err
	}
	return &Console{opts: opts, started: opts.Now(), files: files}, nil
}

// loadAssets reads every embedded file with its media type and ETag.
func loadAssets() (map[string]asset, error) {
	files := map[string]asset{}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read embedded %s: %w", p, err)
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		files[strings.TrimPrefix(p, "static/")] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load console files: %w", err)
	}
	return files, nil
}

// securityHeaders go on every console response, API answers included.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

// ServeHTTP serves Prefix: the API under api/, the files otherwise.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if strings.HasPrefix(r.URL.Path, apiPrefix) {
		c.serveAPI(w, r)
		return
	}
	c.serveFile(w, r)
}

// serveFile answers GET and HEAD for an embedded file; the console itself
// for the bare prefix.
func (c *Console) serveFile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	a, ok := c.files[name]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes that a 304
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(a.body)
}
