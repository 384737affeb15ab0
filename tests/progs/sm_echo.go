// A Go echo server for tests/e2e/sockmap_e2e.sh: Go's runtime makes its
// own system calls, so LD_PRELOAD never sees them; the sockmap path does.
//
//	sm_echo PORTFILE   listen on 127.0.0.1, write the port, echo one
//	                   client until its EOF, then close
//
// It echoes with Read and Write, not io.Copy(c, c): that one splices
// (TCPConn.ReadFrom), and splice(2) does not see the bytes the sockmap
// path redirects (docs/ARCHITECTURE.md, "The sockmap path").
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println("FAIL: listen:", err)
		os.Exit(1)
	}
	port := l.Addr().(*net.TCPAddr).Port
	tmp := os.Args[1] + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
		fmt.Println("FAIL: port file:", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, os.Args[1]); err != nil {
		fmt.Println("FAIL: port file:", err)
		os.Exit(1)
	}
	c, err := l.Accept()
	if err != nil {
		fmt.Println("FAIL: accept:", err)
		os.Exit(1)
	}
	var n int64
	buf := make([]byte, 256<<10)
	for {
		r, err := c.Read(buf)
		if r > 0 {
			if _, werr := c.Write(buf[:r]); werr != nil {
				fmt.Println("FAIL: write:", werr)
				os.Exit(1)
			}
			n += int64(r)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println("FAIL: read:", err)
			os.Exit(1)
		}
	}
	c.Close()
	fmt.Printf("ok echo server go %d\n", n)
}
