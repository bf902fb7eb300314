package testenv

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// startLoopbackDNS serves DNS over TCP on 127.0.0.1 until t ends, answering
// every A query with 127.0.0.1 and every other query with no records, so
// that a server under test (Pebble validating a challenge) reaches any
// test host name on loopback. It returns its address.
func startLoopbackDNS(t testing.TB) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveDNSConn(c)
		}
	}()
	return ln.Addr().String(), nil
}

// serveDNSConn answers the length-prefixed queries on one TCP connection.
func serveDNSConn(c net.Conn) {
	defer c.Close()
	for {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(q); err != nil || len(m.Questions) != 1 {
			return
		}
		m.Header.Response, m.Header.Authoritative, m.Header.RCode = true, true, dnsmessage.RCodeSuccess
		if qq := m.Questions[0]; qq.Type == dnsmessage.TypeA {
			m.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: qq.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1},
				Body:   &dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}},
			}}
		}
		out, err := m.Pack()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(n[:], uint16(len(out)))
		if _, err := c.Write(append(n[:], out...)); err != nil {
			return
		}
	}
}
