package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a process the test starts later with that port in its configuration.
//
// It is chosen below the kernel's ephemeral range rather than by listening
// on port 0: a port the kernel hands out for ":0" comes from the same range
// as the source ports of outgoing connections, so between our close and the
// server's bind any connection the tests open (to MinIO, PostgreSQL, the
// log) could take it, and the server then fails with "address already in
// use" (seen when several test runs shared the machine). A random port
// outside that range can only be taken by another listener choosing it too.
func FreePort() (int, error) {
	lo, hi := 10000, ephemeralLow()
	if hi-lo < 1000 {
		return kernelPort()
	}
	for range 50 {
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return kernelPort()
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 if
// it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
