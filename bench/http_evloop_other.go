//go:build !linux

package bench

// startEvloop is EngineFasthttp where there is no epoll.
func startEvloop(r *httpRun) (func(), error) { return startFasthttp(r) }
