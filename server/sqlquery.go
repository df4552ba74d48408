package server

import (
	"github.com/gin-gonic/gin"
)

// sqlQueryRun serves $sqlquery-run.
func (s *Server) sqlQueryRun(c *gin.Context, id string) {
	s.notSupported(c, "$sqlquery-run is not available yet")
}
