// SPDX-License-Identifier: Apache-2.0
// A Go service with net/http/pprof for the scrape test: it burns CPU in burnLoop and allocates
// 1 MiB every 50 ms in allocLoop, and prints its loopback port on stdout.
package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"time"
)

var sink []byte

//go:noinline
func burnLoop() {
	x := 0
	for {
		for i := 0; i < 1000000; i++ {
			x += i
		}
		if x == 42 {
			fmt.Println(x)
		}
		time.Sleep(time.Millisecond)
	}
}

//go:noinline
func allocLoop() {
	for {
		sink = make([]byte, 1<<20)
		time.Sleep(50 * time.Millisecond)
	}
}

func main() {
	runtime.MemProfileRate = 4096
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	go burnLoop()
	go allocLoop()
	http.Serve(l, nil)
}
