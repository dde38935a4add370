package testenv

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves a line echo on a loopback port and returns its address.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRelayStallResumeCut(t *testing.T) {
	r := StartRelay(t, echo(t))
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	roundTrip := func(msg string, within time.Duration) (string, error) {
		_ = c.SetDeadline(time.Now().Add(within))
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return "", err
		}
		return rd.ReadString('\n')
	}
	if got, err := roundTrip("a", 2*time.Second); err != nil || got != "a\n" {
		t.Fatalf("through the relay: %q, %v", got, err)
	}
	r.Stall()
	if got, err := roundTrip("b", 200*time.Millisecond); err == nil {
		t.Fatalf("a stalled relay forwarded %q", got)
	}
	r.Resume()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := rd.ReadString('\n'); err != nil || got != "b\n" {
		t.Fatalf("after Resume: %q, %v (the stalled bytes must arrive)", got, err)
	}
	r.Cut()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := rd.ReadString('\n'); err == nil {
		t.Fatal("a cut connection still answered")
	}
	if r.Accepted() != 1 {
		t.Fatalf("Accepted = %d, want 1", r.Accepted())
	}
}
