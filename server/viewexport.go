package server

import (
	"github.com/gin-gonic/gin"
)

// viewExport serves $viewdefinition-export.
func (s *Server) viewExport(c *gin.Context, id string) {
	s.notSupported(c, "$viewdefinition-export is not available yet")
}
