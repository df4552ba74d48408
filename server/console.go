package server

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/server/console"
)

// mountConsole serves the web console at /console/ and sends browsers that
// open the server's root there; API clients asking for / still get a 404
// OperationOutcome.
func (s *Server) mountConsole(e *gin.Engine) {
	con, err := console.New(console.Options{
		Store: s.store, Registry: s.cfg.Registry, Version: s.cfg.Version, Logger: s.log,
		Session: consoleSession,
	})
	if err != nil { // the files are embedded: this fails only in a broken build
		s.log.Error("web console disabled", zap.Error(err))
		return
	}
	e.GET("/", s.rootRedirect)
	e.GET("/console", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, console.Prefix) })
	serve := func(c *gin.Context) {
		if strings.HasPrefix(c.Param("path"), "/api/") {
			if s.tenant(c); c.IsAborted() {
				return
			}
			if s.authenticate(c); c.IsAborted() {
				return
			}
		}
		con.ServeHTTP(c.Writer, c.Request)
	}
	e.GET(console.Prefix+"*path", serve)
	e.HEAD(console.Prefix+"*path", serve)
	e.POST(console.Prefix+"*path", serve) // the API's expressions; files answer 405
}

// consoleSession is the authenticated caller, for the console's API.
func consoleSession(r *http.Request) (console.Session, bool) {
	caller, ok := CallerFrom(r.Context())
	if !ok {
		return console.Session{}, false
	}
	return console.Session{Tenant: caller.Tenant, Principal: caller.Principal}, true
}

// rootRedirect sends a browser (a request that accepts HTML) to the console.
func (s *Server) rootRedirect(c *gin.Context) {
	if strings.Contains(c.GetHeader("Accept"), "text/html") {
		c.Redirect(http.StatusFound, console.Prefix)
		return
	}
	s.abort(c, fail(http.StatusNotFound, "not-found", "no such endpoint: "+c.Request.URL.Path, ""))
}
