package uverbs

import (
	"encoding/binary"
	"sync"
	"testing"
)

// TestQueryPortExConcurrent: two goroutines ask one context for different
// ports; each must get its own port's answer (the output slots are shared
// and were once read after the lock was released).
func TestQueryPortExConcurrent(t *testing.T) {
	c, _ := newFakeContext(t)
	fakeIoctl(t, c, func(msg []byte) error {
		port := binary.NativeEndian.Uint64(msg[24+8:]) // PORT_NUM's inline value
		if binary.NativeEndian.Uint64(msg[24+16+8:]) != c.ioctlOut(0) {
			t.Error("RESP does not point at output slot 0")
		}
		// The call holds the context's lock: the kernel's write.
		for i := range queryPortRespSize {
			c.arena[ioctlOutOffset+i] = byte(port)
		}
		return nil
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrong := 0
	for port := uint8(1); port <= 2; port++ {
		wg.Go(func() {
			for range 5000 {
				a, err := c.QueryPortEx(DriverIDRXE, port)
				if err != nil {
					t.Error(err)
					return
				}
				if a.ActiveSpeedEx != uint32(port)*0x01010101 {
					mu.Lock()
					wrong++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if wrong > 0 {
		t.Errorf("%d answers carried the other goroutine's port", wrong)
	}
}
