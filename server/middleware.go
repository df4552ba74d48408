package server

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/fhirschema"
)

const requestIDKey = "fhirstore.requestID"

// safeRequestID limits client-supplied request ids to what is safe to log and echo.
var safeRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID takes X-Request-Id from the client when it is safe, else makes one,
// and echoes it in the response.
func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-Id")
	if !safeRequestID.MatchString(id) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Set(requestIDKey, id)
	c.Header("X-Request-Id", id)
	c.Next()
}

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// accessLog writes one structured line per request.
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	fields := []zap.Field{
		zap.String("request_id", requestID(c)),
		zap.String("tenant", c.GetString(tenantKey)),
		zap.String("method", c.Request.Method),
		zap.String("path", c.Request.URL.Path),
		zap.Int("status", c.Writer.Status()),
		zap.Duration("latency", time.Since(start)),
		zap.Int("bytes", c.Writer.Size()),
	}
	if len(c.Errors) > 0 { // errors handlers kept on the context, such as an XML rendering failure
		fields = append(fields, zap.String("error", c.Errors.String()))
	}
	s.log.Info("request", fields...)
}

// recovery turns a panic into a 500 OperationOutcome that says nothing of
// the server's insides; the stack goes to the log.
func (s *Server) recovery(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("panic serving request", zap.String("request_id", requestID(c)),
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			if !c.Writer.Written() {
				s.abort(c, fail(http.StatusInternalServerError, "exception", "internal server error", ""))
			}
		}
	}()
	c.Next()
}

func isResourceType(name string) bool { return fhirschema.IsStoredType(name) }

func quote(s string) string { return strconv.Quote(s) }
