// Every call from the engine into user code goes through one of these
// functions. They are never inlined and their names say what is being
// called, so a backtrace or a profile shows where boardloop hands over to
// user code and which kind of item it is (Core Foundation's
// `__CFRUNLOOP_IS_CALLING_OUT_TO_...` functions do the same).

@inline(never)
func __BOARDLOOP_IS_CALLING_OUT_TO_A_TIMER__(_ timer: RunLoopTimer) {
    timer.handler(timer)
}

@inline(never)
func __BOARDLOOP_IS_CALLING_OUT_TO_AN_OBSERVER__(_ observer: RunLoopObserver, _ activity: RunLoopActivity) {
    observer.handler(observer, activity)
}

@inline(never)
func __BOARDLOOP_IS_CALLING_OUT_TO_A_CUSTOM_SOURCE__(_ source: CustomSource) {
    source.performCallback()
}

@inline(never)
func __BOARDLOOP_IS_CALLING_OUT_TO_A_PORT_SOURCE__(_ source: PortSource, _ events: PortSource.Events) {
    source.handler(source, events)
}

@inline(never)
func __BOARDLOOP_IS_CALLING_OUT_TO_A_PERFORM_REQUEST__(_ block: borrowing PerformQueue.Block) {
    block.run()
}

@inline(never)
func __BOARDLOOP_IS_CALLING_OUT_TO_A_PERFORM_REQUEST__(_ item: PerformWorkItem) {
    item.block()
}
