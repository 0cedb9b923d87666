package nldev

// SetReorderLimit changes how much ResDumpPortOrder holds back, for tests;
// call the result to restore it.
func SetReorderLimit(n int) (restore func()) {
	old := reorderLimit
	reorderLimit = n
	return func() { reorderLimit = old }
}
