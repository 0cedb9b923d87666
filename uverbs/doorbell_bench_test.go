package uverbs

import "testing"

// BenchmarkDoorbellEncode is what encoding a doorbell POST_SEND costs, once
// a work request before doorbellCommand kept it per queue pair.
func BenchmarkDoorbellEncode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		req := postSendReq{Response: 1 << 20, QPHandle: 3, WQESize: doorbellWQESize}
		if _, err := encodeCommand(cmdPostSend, &req, nil, 4); err != nil {
			b.Fatal(err)
		}
	}
}
