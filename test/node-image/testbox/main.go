// testbox: the only program in the two images the test node runs (built locally by
// scripts/prepare-node.sh, never pulled): `pause` is the pod sandbox (containerd's
// sandbox_image), the other steps make a busybox-like test container.
//
// Arguments are steps separated by "--", run in order, for example
//
//	testbox echo started -- write /data/out hello -- sleep
//
// Steps:
//
//	pause                  block until SIGTERM or SIGINT, then exit 0 (reaps children meanwhile)
//	sleep [seconds]        like pause, or exit after that many seconds
//	echo <words...>        print the words
//	write <path> <text>    write text to a file (directories created)
//	cat <path>             print a file
//	ls <dir>               print `ls <dir>: <names, sorted>` (`ls <dir>: -` when empty)
//	peek <path> <n>        print `peek <path>: <hex of its first n bytes>` (a block device too)
//	watch <path> [ms]      print the file (`<path>: <content>`) whenever its content changes, forever
//	ifaces                 print every network interface and its addresses (`iface <name> <addr>...`)
//	http-get <url>         GET (TLS not verified), print `status <code>` and the body
//	exit <code>            exit with that code
//
// It is static (CGO_ENABLED=0), so the image needs nothing else.
package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	steps := [][]string{{}}
	for _, a := range os.Args[1:] {
		if a == "--" {
			steps = append(steps, []string{})
			continue
		}
		steps[len(steps)-1] = append(steps[len(steps)-1], a)
	}
	for _, s := range steps {
		if len(s) == 0 {
			continue
		}
		if err := run(s[0], s[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "testbox %s: %v\n", s[0], err)
			os.Exit(1)
		}
	}
}

func waitForSignal(timeout time.Duration) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	var deadline <-chan time.Time
	if timeout > 0 {
		deadline = time.After(timeout)
	}
	for {
		select {
		case sig := <-ch:
			if sig == syscall.SIGCHLD {
				// as PID 1 of a shared PID namespace: reap what ends up here
				for {
					var ws syscall.WaitStatus
					pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
					if pid <= 0 || err != nil {
						break
					}
				}
				continue
			}
			fmt.Printf("testbox: %s, exiting\n", sig)
			os.Exit(0)
		case <-deadline:
			return
		}
	}
}

func run(cmd string, args []string) error {
	switch cmd {
	case "pause":
		waitForSignal(0)
	case "sleep":
		var d time.Duration
		if len(args) > 0 {
			s, err := strconv.ParseFloat(args[0], 64)
			if err != nil {
				return err
			}
			d = time.Duration(s * float64(time.Second))
		}
		waitForSignal(d)
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "write":
		if len(args) != 2 {
			return fmt.Errorf("usage: write <path> <text>")
		}
		if err := os.MkdirAll(filepath.Dir(args[0]), 0o755); err != nil {
			return err
		}
		return os.WriteFile(args[0], []byte(args[1]), 0o644)
	case "cat":
		if len(args) != 1 {
			return fmt.Errorf("usage: cat <path>")
		}
		b, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	case "ls":
		if len(args) != 1 {
			return fmt.Errorf("usage: ls <dir>")
		}
		entries, err := os.ReadDir(args[0])
		if err != nil {
			return err
		}
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) == 0 {
			names = []string{"-"}
		}
		fmt.Printf("ls %s: %s\n", args[0], strings.Join(names, " "))
	case "peek":
		if len(args) != 2 {
			return fmt.Errorf("usage: peek <path> <n>")
		}
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return err
		}
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, n)
		if _, err := io.ReadFull(f, b); err != nil {
			return err
		}
		fmt.Printf("peek %s: %x\n", args[0], b)
	case "watch":
		if len(args) < 1 {
			return fmt.Errorf("usage: watch <path> [ms]")
		}
		interval := 200 * time.Millisecond
		if len(args) > 1 {
			ms, err := strconv.Atoi(args[1])
			if err != nil {
				return err
			}
			interval = time.Duration(ms) * time.Millisecond
		}
		go waitForSignal(0)
		var last []byte
		first := true
		for {
			b, err := os.ReadFile(args[0])
			if err != nil {
				b = []byte("<" + err.Error() + ">")
			}
			if first || !bytes.Equal(b, last) {
				fmt.Printf("%s: %s\n", args[0], strings.TrimSpace(string(b)))
				last, first = b, false
			}
			time.Sleep(interval)
		}
	case "ifaces":
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range ifs {
			addrs, _ := i.Addrs()
			parts := []string{"iface", i.Name}
			for _, a := range addrs {
				parts = append(parts, a.String())
			}
			fmt.Println(strings.Join(parts, " "))
		}
	case "http-get":
		if len(args) != 1 {
			return fmt.Errorf("usage: http-get <url>")
		}
		client := &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		}
		res, err := client.Get(args[0])
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		fmt.Printf("status %d\n%s\n", res.StatusCode, strings.TrimSpace(string(body)))
	case "exit":
		code := 0
		if len(args) > 0 {
			c, err := strconv.Atoi(args[0])
			if err != nil {
				return err
			}
			code = c
		}
		os.Exit(code)
	default:
		return fmt.Errorf("unknown step %q", cmd)
	}
	return nil
}
