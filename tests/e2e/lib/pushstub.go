// SPDX-License-Identifier: Apache-2.0
// A stand-in for strobe's push API, for tests/e2e/agent_retry_after.sh: it answers
// POST /api/v1/push with whatever status the test set last (POST /mode?status=429&retry=3, or
// &date=3 for a Retry-After given as an HTTP date 3 s ahead), and logs every push it receives
// to the file named by its first argument, one line each, written before the answer is sent:
//
//	UNIX_NS STATUS EARLIEST_NEXT_NS SHA256_OF_BODY
//
// EARLIEST_NEXT_NS is the earliest time a client that honours this answer's Retry-After may push
// again (0 when the answer has none). It prints its loopback port on stdout.
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pushstub LOGFILE")
		os.Exit(2)
	}
	log, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	status, retry, date := 200, 0, false
	http.HandleFunc("/mode", func(w http.ResponseWriter, r *http.Request) {
		s, err1 := strconv.Atoi(r.URL.Query().Get("status"))
		n, err2 := strconv.Atoi(r.URL.Query().Get("retry") + r.URL.Query().Get("date"))
		if err1 != nil || (err2 != nil && r.URL.Query().Get("status") != "200") {
			http.Error(w, "want status=N and retry=SECONDS or date=SECONDS", 400)
			return
		}
		mu.Lock()
		status, retry, date = s, n, r.URL.Query().Get("date") != ""
		mu.Unlock()
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/api/v1/push", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad push", 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		var earliest int64
		if status != 200 && retry > 0 {
			if date {
				// HTTP dates have whole seconds: the client may come back at that second
				at := now.Add(time.Duration(retry) * time.Second).UTC().Truncate(time.Second)
				w.Header().Set("Retry-After", at.Format(http.TimeFormat))
				earliest = at.UnixNano()
			} else {
				w.Header().Set("Retry-After", strconv.Itoa(retry))
				earliest = now.Add(time.Duration(retry) * time.Second).UnixNano()
			}
		}
		fmt.Fprintf(log, "%d %d %d %x\n", now.UnixNano(), status, earliest, sha256.Sum256(body))
		log.Sync()
		if status == 200 {
			fmt.Fprintln(w, `{"profiles":1}`)
		} else {
			http.Error(w, "stub says "+strconv.Itoa(status), status)
		}
	})
	http.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	fmt.Fprintln(os.Stderr, http.Serve(ln, nil))
	os.Exit(1)
}
