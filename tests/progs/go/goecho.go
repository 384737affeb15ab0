// goecho: a Go echo server and client, for tests/e2e/reach_static_go.sh.
// Go's runtime makes its own system calls for network I/O, so LD_PRELOAD
// never sees these sockets.
//
//	goecho server PORTFILE CONNS   listen on 127.0.0.1:0, write the port,
//	                               echo CONNS connections until EOF each
//	goecho client PORT IN OUT      send the file IN, then shut down the
//	                               write side; write what comes back to OUT
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "goecho:", err)
	os.Exit(1)
}

func server(portFile string, conns int) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		fail(err)
	}
	var total int64
	for i := 0; i < conns; i++ {
		c, err := l.Accept()
		if err != nil {
			fail(err)
		}
		n, err := io.Copy(c, c)
		if err != nil {
			fail(err)
		}
		total += n
		c.Close()
	}
	fmt.Printf("PASS goecho server conns=%d bytes=%d\n", conns, total)
}

func client(port, in, out string) {
	c, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		fail(err)
	}
	f, err := os.Open(in)
	if err != nil {
		fail(err)
	}
	o, err := os.Create(out)
	if err != nil {
		fail(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, f)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		done <- err
	}()
	n, err := io.Copy(o, c)
	if err != nil {
		fail(err)
	}
	if err := <-done; err != nil {
		fail(err)
	}
	if err := o.Close(); err != nil {
		fail(err)
	}
	fmt.Printf("PASS goecho client bytes=%d\n", n)
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "server" {
		n, err := strconv.Atoi(os.Args[3])
		if err != nil {
			fail(err)
		}
		server(os.Args[2], n)
	} else if len(os.Args) == 5 && os.Args[1] == "client" {
		client(os.Args[2], os.Args[3], os.Args[4])
	} else {
		fail(fmt.Errorf("usage: goecho server PORTFILE CONNS | client PORT IN OUT"))
	}
}
