package gateway

// History is the HTTP layer's own bounded memory of what the core no longer
// holds (recent trades per market, recently finished orders). It is updated
// by the read-view goroutine and read inside Backend.Read.
type History struct{}
