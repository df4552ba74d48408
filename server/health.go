package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// healthz answers while the process runs; it reports committed
// transactions that could not be applied ("degraded", still 200: the
// server serves everything else, and a restart would not help).
func (s *Server) healthz(c *gin.Context) {
	body := gin.H{"status": "ok"}
	if s.addHeld(body) {
		body["status"] = "degraded"
	}
	c.JSON(http.StatusOK, body)
}

// readyz answers 200 only while the database answers, within two seconds.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": "database not reachable"})
		return
	}
	body := gin.H{"status": "ready"}
	s.addHeld(body)
	c.JSON(http.StatusOK, body)
}

// addHeld adds the transactions whose resources are held (retried or
// quarantined, store.HeldTransactions) to a health body, if any.
func (s *Server) addHeld(body gin.H) bool {
	retrying, quarantined := s.store.HeldTransactions()
	if retrying+quarantined == 0 {
		return false
	}
	body["transactions"] = gin.H{"retrying": retrying, "quarantined": quarantined}
	body["reason"] = "committed transactions could not be applied: their resources answer 5xx; see fhirstore recover --list"
	return true
}
