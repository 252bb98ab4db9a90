package stream

// funding channel: placeholder until the transfer service's hook lands.

func (h *Hub) fundingSubs() int { return 0 }

func (h *Hub) subscribeFunding(c *conn, r *Request) *Error {
	return badReq(CodeUnavailable, "the funding channel needs Postgres")
}
