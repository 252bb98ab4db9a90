package gateway

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/gateway/openapi"
)

// GET /openapi.json: the OpenAPI document of this API (gateway/openapi), public like /health.
func (s *Server) openAPI(ctx *fasthttp.RequestCtx, _ *reqState) *APIError {
	ctx.SetStatusCode(http.StatusOK)
	ctx.SetContentType("application/json")
	ctx.Response.SetBodyRaw(openapi.Document) // never written to: fasthttp only reads it
	return nil
}
