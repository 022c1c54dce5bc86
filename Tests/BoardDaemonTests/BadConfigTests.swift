import BoardSupport
import Foundation
import Testing

@testable import BoardDaemon

/// Every file in Fixtures/bad is a broken config; this table holds exactly
/// what checking it must print (the machine is fixed: 2 CPUs, no device
/// tree, no GPIO chips, so the CPU and detection checks do not depend on
/// the machine running the tests).
let badConfigs: [(String, [String])] = [
    ("alias-expansion", [
            "alias-expansion.yaml:9:169: error: alias *l3 makes the document larger than 100000 nodes from aliases (it repeats 27055 nodes); a config never needs that many — write the values out or use fewer aliases",
    ]),
    ("action-with-two-keys", [
            "action-with-two-keys.yaml:9:9: error: tasks.t.do[0]: each action is a mapping with one key, such as toggle: led (found a mapping)",
    ]),
    ("active-low-not-bool", [
            "active-low-not-bool.yaml:3:47: error: lines.button.input.active_low: expected true or false, found 'maybe'",
    ]),
    ("auto-no-match", [
            "auto-no-match.yaml:1:8: error: board: auto-detection found no matching board (read model: (none: no proc/device-tree/model); compatible: (none); gpio chips: (none); known boards: demo, generic, gpio-sim, raspberry-pi-1, raspberry-pi-2, raspberry-pi-3, raspberry-pi-4, raspberry-pi-400, raspberry-pi-5, raspberry-pi-500, raspberry-pi-zero, raspberry-pi-zero-2-w, raspberry-pi-zero-w); name the board, e.g. board: generic",
    ]),
    ("bad-line-name", [
            "bad-line-name.yaml:3:3: error: lines.1led: line name '1led' must start with a letter and use only letters, digits, _ and -",
    ]),
    ("board-not-a-name", [
            "board-not-a-name.yaml:1:8: error: board: expected a board name or auto, found a list",
    ]),
    ("bom-then-error", [
            "bom-then-error.yaml:1:8: error: board: unknown board 'demoo'; did you mean 'demo'? (known boards: demo, generic, gpio-sim, raspberry-pi-1, raspberry-pi-2, raspberry-pi-3, raspberry-pi-4, raspberry-pi-400, raspberry-pi-5, raspberry-pi-500, raspberry-pi-zero, raspberry-pi-zero-2-w, raspberry-pi-zero-w)",
    ]),
    ("bare-number-duration", [
            "bare-number-duration.yaml:3:45: error: lines.button.input.debounce: '20' has no unit; write 20ms (units: us, ms, s, min, h)",
    ]),
    ("bare-number-pin", [
            "bare-number-pin.yaml:3:15: error: lines.led.pin: a bare number is ambiguous; write GPIO17 (the GPIO number) or PIN17 (the header pin)",
    ]),
    ("chip-not-on-board", [
            "chip-not-on-board.yaml:3:16: error: lines.led.chip: the raspberry-pi-4 board has no chip 'pinctrl-bcm2835'; did you mean 'pinctrl-bcm2711'? (its chips, by label: pinctrl-bcm2711)",
    ]),
    ("click-and-multi-press", [
            "click-and-multi-press.yaml:8:9: warning: reactions[1].on: line 'button' has a multi_press reaction and a click one (at line 6): a double click fires the click twice and the multi_press once; to tell them apart, give the line a gesture group (lines.button.gestures: { one_of: [click, double_click] }) and use gesture: click and gesture: double_click",
    ]),
    ("click-min-not-below-max", [
            "click-min-not-below-max.yaml:6:32: error: reactions[0].on.click: click min (400ms) must be less than max (300ms)",
    ]),
    ("condition-unknown-mode", [
            "condition-unknown-mode.yaml:7:19: error: reactions[0].when.mode: no mode named 'night' (modes: default)",
    ]),
    ("debounce-above-limit", [
            "debounce-above-limit.yaml:3:72: error: lines.button.input.debounce: 4001s is above the limit of 4000s (the kernel takes a debounce period as a 32-bit count of microseconds)",
    ]),
    ("debounce-on-output", [
            "debounce-on-output.yaml:3:33: error: lines.led.output.debounce: debounce applies to inputs only; line 'led' is an output",
    ]),
    ("drain-every-out-of-range", [
            "drain-every-out-of-range.yaml:3:73: error: lines.flow.input.drain_every: out of range: a drain period is between 1ms and 10s",
    ]),
    ("drain-every-without-drain", [
            "drain-every-without-drain.yaml:3:47: error: lines.flow.input.drain_every: drain_every needs drain: the size of the ring the held events are read into (for example drain: 4096)",
    ]),
    ("duplicate-key", [
            "duplicate-key.yaml:4:3: error: key 'led' is given more than once in this mapping (first at 3:3)",
    ]),
    ("duplicate-keys-everywhere", [
            "duplicate-keys-everywhere.yaml:3:44: error: key 'initial' is given more than once in this mapping (first at 3:30)",
            "duplicate-keys-everywhere.yaml:5:3: error: key 'led' is given more than once in this mapping (first at 3:3)",
            "duplicate-keys-everywhere.yaml:7:40: error: key 'every' is given more than once in this mapping (first at 7:8)",
    ]),
    ("edge-not-a-choice", [
            "edge-not-a-choice.yaml:3:41: error: lines.button.input.edge: 'up' is not one of none, rising, falling, both",
    ]),
    ("edge-on-output", [
            "edge-on-output.yaml:3:47: error: lines.led.output.edge: edge applies to inputs only; line 'led' is an output",
    ]),
    ("five-independent-errors", [
            "five-independent-errors.yaml:3:57: error: lines.button.input.debounce: '20' has no unit; write 20ms (units: us, ms, s, min, h)",
            "five-independent-errors.yaml:4:15: error: lines.led.pin: the raspberry-pi-4 board has no pin 'GPIO72' (nearest: GPIO12, GPIO2, GPIO22)",
            "five-independent-errors.yaml:7:24: error: modes.critical.admits[0]: no priority named 'urgent' (priorities: low, normal, high)",
            "five-independent-errors.yaml:9:18: error: tasks.fast.every: 10us is too short; a task runs at most every 100us",
            "five-independent-errors.yaml:11:17: error: reactions[0].on.line: no line named 'buton'; did you mean 'button'? (lines: button, led, valve)",
    ]),
    ("generic-pin-name", [
            "generic-pin-name.yaml:3:15: error: lines.led.pin: the generic board has no pin names; give chip and offset (chip: gpiochip0, offset: 17) or line_name",
    ]),
    ("gesture-hold-repeat-negative", [
            "gesture-hold-repeat-negative.yaml:6:48: error: reactions[0].on.repeat: '-500ms' is negative; a duration is zero or more",
    ]),
    ("gesture-hold-repeat-zero", [
            "gesture-hold-repeat-zero.yaml:6:48: error: reactions[0].on.repeat: must be more than zero",
    ]),
    ("gesture-not-in-group", [
            "gesture-not-in-group.yaml:6:34: error: reactions[0].on.gesture: 'double_click' is not in line 'button''s gesture group (click, hold)",
    ]),
    ("gesture-without-group", [
            "gesture-without-group.yaml:6:34: error: reactions[0].on.gesture: line 'button' has no gesture group; add lines.button.gestures: { one_of: [click, double_click] }",
    ]),
    ("gestures-need-both-edges", [
            "gestures-need-both-edges.yaml:3:51: error: lines.button.gestures: gestures need both edges, but line 'button' detects rising (set input.edge: both)",
    ]),
    ("ground-pin", [
            "ground-pin.yaml:3:15: error: lines.led.pin: PIN9 is a ground pin, not a GPIO",
    ]),
    ("hold-needs-both-edges", [
            "hold-needs-both-edges.yaml:6:25: error: reactions[0].on.hold: hold needs both edges, but line 'button' detects falling only (set lines.button.input.edge: both)",
    ]),
    ("if-without-then", [
            "if-without-then.yaml:9:13: error: tasks.t.do[0].if: if needs then (if: { condition: { line: door, is: on }, then: [...], else: [...] })",
    ]),
    ("input-and-output", [
            "input-and-output.yaml:3:34: error: lines.led.output: a line is an input or an output, not both",
    ]),
    ("lines-not-mapping", [
            "lines-not-mapping.yaml:2:8: error: lines: expected a mapping, found a list",
    ]),
    ("log-unknown-level", [
            "log-unknown-level.yaml:6:39: error: tasks.t.do[0].log.level: 'loud' is not one of debug, info, notice, warning, error",
    ]),
    ("loop-reservation-too-large", [
            "loop-reservation-too-large.yaml:528:34: error: sequences.s457.max: this makes the main loop reserve about 257 MiB at start (22 sources, 457009 timers, 64 modes); a run loop may reserve at most 256 MiB",
    ]),
    ("mode-default-configured", [
            "mode-default-configured.yaml:6:3: error: modes.default: the default mode admits every priority and cannot be configured",
    ]),
    ("mode-unknown-priority", [
            "mode-unknown-priority.yaml:6:24: error: modes.critical.admits[0]: no priority named 'urgent' (priorities: low, normal, high)",
    ]),
    ("mqtt-commands", [
            "mqtt-commands.yaml:9:18: error: mqtt.qos.states: 3 is out of range; it must be between 0 and 2",
            "mqtt-commands.yaml:10:25: error: mqtt.commands.outputs[0]: line 'button' is an input; only outputs can be commanded",
            "mqtt-commands.yaml:10:33: error: mqtt.commands.outputs[1]: no line named 'lde'; did you mean 'led'? (lines: button, led)",
            "mqtt-commands.yaml:10:51: error: mqtt.commands.sequences[0]: no sequence named 'blnk'; did you mean 'blink'?",
            "mqtt-commands.yaml:11:17: error: mqtt.topic_prefix: a topic prefix is one or more levels without '+', '#' or empty levels (such as boardd/greenhouse-1); found 'boardd/#'",
            "mqtt-commands.yaml:12:21: error: mqtt.tls.cert_file: cannot read '/nonexistent/client.crt': No such file or directory",
    ]),
    ("mqtt-inline-password", [
            "mqtt-inline-password.yaml:7:13: error: mqtt.password: a password is not written in the config: put it in secrets.yaml beside the config and write password: !secret NAME, or give password_file (a file only boardd's user may read)",
    ]),
    ("mqtt-no-broker", [
            "mqtt-no-broker.yaml:5:3: error: mqtt: broker: missing (the broker's host name or address, such as 192.168.1.10 or mqtt.local)",
    ]),
    ("mqtt-url-broker", [
            "mqtt-url-broker.yaml:5:11: error: mqtt.broker: expected a host name or address (such as 192.168.1.10 or mqtt.local; no URL, the port goes in port:), found 'mqtt://broker.local:1883'",
    ]),
    ("multi-press-count-one", [
            "multi-press-count-one.yaml:6:47: error: reactions[0].on.multi_press.count: 1 is out of range; it must be between 2 and 10",
    ]),
    ("negative-duration", [
            "negative-duration.yaml:3:45: error: lines.button.input.debounce: '-5ms' is negative; a duration is zero or more",
    ]),
    ("nested-too-deep", [
            "nested-too-deep.yaml:3:142: error: lists and mappings are nested more than 100 deep here; a config needs only a few levels",
    ]),
    ("neither-input-nor-output", [
            "neither-input-nor-output.yaml:3:3: error: lines.led: line 'led' needs input or output",
    ]),
    ("no-trigger", [
            "no-trigger.yaml:6:9: error: reactions[0].on: no trigger; give one of edge, press, release, click, multi_press, hold or gesture",
    ]),
    ("nul-byte", [
            "nul-byte.yaml:3:47: error: a NUL byte is not allowed in YAML text",
    ]),
    ("offset-beyond-chip", [
            "offset-beyond-chip.yaml:3:41: error: lines.led.offset: 60 is out of range; it must be between 0 and 57",
    ]),
    ("pin-used-twice", [
            "pin-used-twice.yaml:4:16: error: lines.lamp.pin: GPIO17 (pinctrl-bcm2711:17) is already used by line 'button' (line 3)",
    ]),
    ("power-pin", [
            "power-pin.yaml:3:15: error: lines.led.pin: PIN2 is a 5V power pin, not a GPIO",
    ]),
    ("priority-unknown", [
            "priority-unknown.yaml:3:47: error: lines.button.priority: no priority named 'urgent' (priorities: low, normal, high)",
    ]),
    ("pulse-on-input", [
            "pulse-on-input.yaml:7:20: error: reactions[0].do[0].pulse.button: line 'button' is an input; pulse needs an output line",
    ]),
    ("log-rate-limit", [
            "log-rate-limit.yaml:3:24: error: log.rate_limit.lines: 0 is out of range; it must be between 1 and 1000000",
            "log-rate-limit.yaml:3:32: error: log.rate_limit.per: a rate limit's interval is at most 1h; found 2h",
            "log-rate-limit.yaml:4:3: error: log.level: unknown key 'level' (known keys: rate_limit)",
    ]),
    ("log-rate-limit-not-a-mapping", [
            "log-rate-limit-not-a-mapping.yaml:2:20: error: log.rate_limit: expected rate_limit: { lines: 200, per: 5s }, or rate_limit: off, found 'sometimes'",
    ]),
    ("rate-limit-missing-per", [
            "rate-limit-missing-per.yaml:3:37: error: lines.button.rate_limit: rate_limit needs per (rate_limit: { events: 100, per: 1s })",
    ]),
    ("rate-limit-on-output", [
            "rate-limit-on-output.yaml:3:35: error: lines.led.rate_limit: rate_limit applies to inputs only; line 'led' is an output",
    ]),
    ("reaction-unknown-line", [
            "reaction-unknown-line.yaml:6:17: error: reactions[0].on.line: no line named 'buton'; did you mean 'button'? (lines: button, led)",
    ]),
    ("repeat-without-hold", [
            "repeat-without-hold.yaml:6:38: error: reactions[0].on.repeat: repeat goes with hold (on: { line: button, hold: 2s, repeat: 500ms })",
    ]),
    ("repeat-on-gesture-click", [
            "repeat-on-gesture-click.yaml:6:41: error: reactions[0].on.repeat: repeat goes with hold or gesture: hold; a click does not repeat (on: { line: button, gesture: hold, repeat: 500ms })",
    ]),
    ("reserved-pin", [
            "reserved-pin.yaml:3:15: error: lines.led.pin: ID_SD (pin 27) is reserved: HAT ID EEPROM bus (I2C0); keep it free for HAT detection",
    ]),
    ("run-missing-program", [
            "run-missing-program.yaml:5:19: warning: commands.chime.argv[0]: '/nonexistent/bin/chime' does not exist on this machine: running it will fail",
            "run-missing-program.yaml:6:19: warning: commands.shout.argv[0]: 'boardd-no-such-program-anywhere' is not found on PATH: running it will fail (give its absolute path)",
            "run-missing-program.yaml:9:29: warning: reactions[0].do[1].run[0]: '/dev/null' is not an executable file: running it will fail",
    ]),
    ("run-string-with-arguments", [
            "run-string-with-arguments.yaml:6:16: error: reactions[0].do[0].run: no command named 'notify-send doorbell'; to run a program, give its argv as a list: run: [\"notify-send\", \"doorbell\"]",
    ]),
    ("run-unknown-command", [
            "run-unknown-command.yaml:7:16: error: reactions[0].do[0].run: no command named 'chime'; to run a program, give its argv as a list: run: [\"chime\"]",
    ]),
    ("sequence-max-with-single", [
            "sequence-max-with-single.yaml:6:27: error: sequences.pour.max: max applies to the queued and parallel policies; this sequence is single",
    ]),
    ("sequence-unknown-mode", [
            "sequence-unknown-mode.yaml:8:17: error: sequences.pour.mode: no mode named 'critcal'; did you mean 'critical'? (modes: default, critical)",
    ]),
    ("sequence-unknown-policy", [
            "sequence-unknown-policy.yaml:6:19: error: sequences.pour.policy: 'queue' is not one of single, restart, queued, parallel; did you mean 'queued'?",
    ]),
    ("set-on-input", [
            "set-on-input.yaml:6:32: error: tasks.t.do[0].set.button: line 'button' is an input; set needs an output line",
    ]),
    ("set-value-not-on-off", [
            "set-value-not-on-off.yaml:6:37: error: tasks.t.do[0].set.led: expected on or off, found 'open'",
    ]),
    ("shell-argv-many", [
            "shell-argv-many.yaml:3:31: error: commands.hello.argv: with shell: true, argv is one string: the shell command line",
    ]),
    ("task-missing-every", [
            "task-missing-every.yaml:6:3: error: tasks.t: task 't' needs every (its period, e.g. every: 500ms)",
    ]),
    ("task-too-short", [
            "task-too-short.yaml:6:15: error: tasks.t.every: 50us is too short; a task runs at most every 100us",
    ]),
    ("task-unknown-mode", [
            "task-unknown-mode.yaml:6:30: error: tasks.t.in_modes[0]: no mode named 'quiet' (modes: default)",
    ]),
    ("task-unknown-worker", [
            "task-unknown-worker.yaml:6:27: error: tasks.t.worker: no worker named 'io' (the config declares no workers)",
    ]),
    ("task-zero-interval", [
            "task-zero-interval.yaml:6:15: error: tasks.t.every: a task period must be more than zero (at least 100us)",
    ]),
    ("toggle-on-input", [
            "toggle-on-input.yaml:6:33: error: tasks.t.do[0].toggle: line 'button' is an input; toggle needs an output line",
    ]),
    ("too-many-lines-on-one-chip", [
            "too-many-lines-on-one-chip.yaml:3:3: error: lines: the main loop owns 65 lines of chip gpiochip0; one line request holds at most 64 (move some to a worker)",
    ]),
    ("too-many-modes", [
            "too-many-modes.yaml:5:1: error: modes: 64 modes and the default mode make 65 on the main loop; a run loop has at most 64",
    ]),
    ("too-many-priorities", [
            "too-many-priorities.yaml:2:13: error: priorities: 65 priorities; a config has at most 64 (a mode admits priorities as the bits of one 64-bit word)",
    ]),
    ("trigger-on-output", [
            "trigger-on-output.yaml:6:17: error: reactions[0].on.line: line 'led' is an output; a trigger needs an input line",
    ]),
    ("two-triggers", [
            "two-triggers.yaml:6:38: error: reactions[0].on: give one trigger per reaction; found press and hold",
    ]),
    ("unknown-action", [
            "unknown-action.yaml:6:25: error: tasks.t.do[0].tggle: unknown key 'tggle'; did you mean 'toggle'?",
    ]),
    ("unknown-board", [
            "unknown-board.yaml:1:8: error: board: unknown board 'raspbery-pi-4'; did you mean 'raspberry-pi-4', 'raspberry-pi-1' or 'raspberry-pi-2'? (known boards: demo, generic, gpio-sim, raspberry-pi-1, raspberry-pi-2, raspberry-pi-3, raspberry-pi-4, raspberry-pi-400, raspberry-pi-5, raspberry-pi-500, raspberry-pi-zero, raspberry-pi-zero-2-w, raspberry-pi-zero-w)",
    ]),
    ("unknown-duration-unit", [
            "unknown-duration-unit.yaml:3:45: error: lines.button.input.debounce: unknown unit 'sec' in '20sec'; units are us, ms, s, min, h; did you mean 's'?",
    ]),
    ("unknown-input-key", [
            "unknown-input-key.yaml:3:47: error: lines.button.input.debounse: unknown key 'debounse'; did you mean 'debounce'?",
    ]),
    ("unknown-line-key", [
            "unknown-line-key.yaml:3:10: error: lines.led.pinn: unknown key 'pinn'; did you mean 'pin'?",
    ]),
    ("unknown-output-key", [
            "unknown-output-key.yaml:3:33: error: lines.led.output.inital: unknown key 'inital'; did you mean 'initial'?",
    ]),
    ("unknown-pin", [
            "unknown-pin.yaml:3:15: error: lines.led.pin: the raspberry-pi-4 board has no pin 'GPIO72' (nearest: GPIO12, GPIO2, GPIO22)",
    ]),
    ("unknown-sequence", [
            "unknown-sequence.yaml:7:21: error: reactions[0].do[0].sequence: no sequence named 'pour' (the config declares no sequences)",
    ]),
    ("unknown-tag", [
            "unknown-tag.yaml:5:37: error: unknown tag '!secrt'; did you mean '!secret'? (the config language has only the tags !include and !secret)",
    ]),
    ("unknown-top-key", [
            "unknown-top-key.yaml:1:1: error: boards: unknown key 'boards'; did you mean 'board'?",
            "unknown-top-key.yaml:1:1: error: no board given (board: NAME or auto): auto-detection found no matching board (read model: (none: no proc/device-tree/model); compatible: (none); gpio chips: (none); known boards: demo, generic, gpio-sim, raspberry-pi-1, raspberry-pi-2, raspberry-pi-3, raspberry-pi-4, raspberry-pi-400, raspberry-pi-5, raspberry-pi-500, raspberry-pi-zero, raspberry-pi-zero-2-w, raspberry-pi-zero-w); name the board, e.g. board: generic",
    ]),
    ("wait-in-reaction", [
            "wait-in-reaction.yaml:7:24: error: reactions[0].do[1].wait: wait is only allowed in a sequence's steps; move these actions into a sequence",
    ]),
    ("worker-cpu-beyond-board", [
            "worker-cpu-beyond-board.yaml:6:31: error: workers.io.cpu: CPU 7 does not exist on the raspberry-pi-4 board (4 CPUs: 0-3)",
    ]),
    ("worker-cpu-other-machine", [
            "worker-cpu-other-machine.yaml:5:28: warning: workers.io.cpu: CPU 5 does not exist on this machine (2 CPUs: 0-1); the gpio-sim board this config is for may have it",
    ]),
    ("worker-cpu-this-machine", [
            "worker-cpu-this-machine.yaml:5:32: error: workers.io.cpu[1]: CPU 5 does not exist on this machine (2 CPUs: 0-1)",
    ]),
    ("worker-line-in-two-workers", [
            "worker-line-in-two-workers.yaml:7:16: error: workers.b.lines[0]: line 'button' already belongs to worker 'a'; a line has one owner",
    ]),
    ("worker-line-twice", [
            "worker-line-twice.yaml:6:30: error: workers.io.lines[2]: line 'button' is listed twice",
    ]),
    ("worker-named-main", [
            "worker-named-main.yaml:6:3: error: workers.main: 'main' is the main loop's name; choose another name for the worker",
    ]),
    ("yaml-bad-indentation", [
            "yaml-bad-indentation.yaml:5:4: error: lines.led: YAML syntax: did not find expected key (while parsing a block mapping at 3:3)",
    ]),
    ("yaml-syntax-error", [
            "yaml-syntax-error.yaml:4:1: error: lines.led: YAML syntax: did not find expected ',' or '}' (while parsing a flow mapping at 3:8)",
    ]),
    ("yaml-tab-among-seven-errors", [
            "yaml-tab-among-seven-errors.yaml:5:1: error: lines.button: YAML syntax: a tab character indents this line; YAML indents with spaces",
            "yaml-tab-among-seven-errors.yaml:6:39: error: lines.door.input.edge: 'sideways' is not one of none, rising, falling, both",
            "yaml-tab-among-seven-errors.yaml:7:15: error: lines.led.pin: the raspberry-pi-4 board has no pin 'GPIO72' (nearest: GPIO12, GPIO2, GPIO22)",
            "yaml-tab-among-seven-errors.yaml:10:24: error: modes.critical.admits[0]: no priority named 'urgent' (priorities: low, normal, high)",
            "yaml-tab-among-seven-errors.yaml:12:18: error: tasks.fast.every: 10us is too short; a task runs at most every 100us",
            "yaml-tab-among-seven-errors.yaml:15:17: error: reactions[0].on.line: no line named 'buton'; did you mean 'button'? (lines: button, door, led, valve)",
            "yaml-tab-among-seven-errors.yaml:20:11: error: reactions[2].do[0].tggle: unknown key 'tggle'; did you mean 'toggle'?",
    ]),
    ("yaml-two-syntax-errors", [
            "yaml-two-syntax-errors.yaml:4:3: error: lines.button: YAML syntax: did not find expected ',' or '}' (while parsing a flow mapping at 3:11)",
            "yaml-two-syntax-errors.yaml:8:5: error: sequences.pour: YAML syntax: did not find expected ',' or ']' (while parsing a flow sequence at 7:12)",
            "yaml-two-syntax-errors.yaml:9:47: error: sequences.drip.policy: 'queue' is not one of single, restart, queued, parallel; did you mean 'queued'?",
            "yaml-two-syntax-errors.yaml:11:15: error: tasks.t.every: 5us is too short; a task runs at most every 100us",
    ]),
]

@Suite struct BadConfigTests {
    @Test(arguments: badConfigs.map(\.0))
    func badConfigReportsExactlyItsErrors(_ name: String) throws {
        let expected = try #require(badConfigs.first { $0.0 == name }?.1)
        let text = try String(contentsOfFile: Fixtures.bad(name), encoding: .utf8)
        let result = ConfigLoader.load(text: text, file: "\(name).yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == expected)
        // A config with an error yields no model; warnings alone do.
        #expect((result.config == nil) == expected.contains { $0.contains(": error: ") })
    }

    @Test func theTableCoversEveryFixtureAndAtLeastForty() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Fixtures.directory + "/bad")
            .filter { $0.hasSuffix(".yaml") }.map { String($0.dropLast(5)) }.sorted()
        #expect(files == badConfigs.map(\.0).sorted())
        #expect(files.count >= 40)
    }

    @Test func fiveIndependentErrorsAreAllReported() throws {
        let text = try String(contentsOfFile: Fixtures.bad("five-independent-errors"), encoding: .utf8)
        let result = ConfigLoader.load(text: text, file: "five.yaml", options: Fixtures.options())
        #expect(result.errors.count == 5)
        #expect(result.errors.map(\.path) == [
            "lines.button.input.debounce", "lines.led.pin", "modes.critical.admits[0]", "tasks.fast.every", "reactions[0].on.line",
        ])
        #expect(result.errors.map(\.line) == [3, 4, 7, 9, 11])
    }

    /// A syntax error hides only the entry it is in: the sibling entries
    /// and the other sections are checked, and a reference to a name the
    /// unreadable entry defines (reactions[1] is on line 'button') is not
    /// reported as unknown.
    @Test func aSyntaxErrorHidesOnlyItsEntry() throws {
        let text = try String(contentsOfFile: Fixtures.bad("yaml-tab-among-seven-errors"), encoding: .utf8)
        let result = ConfigLoader.load(text: text, file: "tab.yaml", options: Fixtures.options())
        #expect(result.config == nil)
        #expect(result.errors.map(\.path) == [
            "lines.button", "lines.door.input.edge", "lines.led.pin", "modes.critical.admits[0]", "tasks.fast.every",
            "reactions[0].on.line", "reactions[2].do[0].tggle",
        ])
        #expect(!result.errors.contains { $0.line == 17 })
        // With the tab replaced by spaces, the six others remain, as they are.
        let fixed = text.replacingOccurrences(of: "\tinput:", with: "    input:")
        let after = ConfigLoader.load(text: fixed, file: "tab.yaml", options: Fixtures.options())
        #expect(after.errors.map(\.path) == Array(result.errors.map(\.path).dropFirst()))
    }

    /// Names in a whole unreadable section or entry of every kind that is
    /// referred to: no follow-on "no X named" errors.
    @Test func referencesIntoUnreadableEntriesAreNotReported() {
        let text = """
            board: raspberry-pi-4
            lines:
              led: { pin: GPIO27, output: { initial: off } }
            modes:
              night: { admits: [high }
            sequences:
              pour: { steps: [ { toggle: led } }
            commands:
              chime: { argv: ["/bin/true" }
            workers:
              io: { lines: [led }
            tasks:
              t: { every: 1s, in_modes: [night], worker: io, do: [ { sequence: pour }, { run: chime } ] }
            """
        let result = ConfigLoader.load(text: text, file: "refs.yaml", options: Fixtures.options())
        #expect(result.errors.map(\.path) == ["modes.night", "sequences.pour", "commands.chime", "workers.io"])
    }

    @Test func aWorkerCPUBeyondThisMachineIsAnErrorWhenTheBoardIsDetectedHere() throws {
        let text = try String(contentsOfFile: Fixtures.bad("worker-cpu-other-machine"), encoding: .utf8)
        let here = MachineInfo(cpuCount: 2, facts: MachineFacts(chipLabels: ["boardloop-sim0", "boardloop-sim1"]))
        let result = ConfigLoader.load(text: text, file: "w.yaml", options: Fixtures.options(machine: here))
        #expect(
            result.diagnostics.map(\.description) == [
                "w.yaml:5:28: error: workers.io.cpu: CPU 5 does not exist on this machine (2 CPUs: 0-1)"
            ])
    }

    /// `repeat:` on a gesture hold, an error once, is a good config.
    @Test func aGestureHoldMayRepeat() throws {
        let text = try String(contentsOfFile: Fixtures.directory + "/good/gesture-hold-repeat.yaml", encoding: .utf8)
        let result = ConfigLoader.load(text: text, file: "gesture-hold-repeat.yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == [])
        #expect(result.config?.reactions.count == 2)
    }

    @Test func anUnreadableFileIsOneError() {
        let result = ConfigLoader.load(path: "/nonexistent/boardd.yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == ["/nonexistent/boardd.yaml: error: no such file"])
    }

    @Test func aFileThatCannotBeReadSaysWhy() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-read-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A directory given as the config.
        #expect(
            ConfigLoader.load(path: dir, options: Fixtures.options()).diagnostics.map(\.description) == [
                "\(dir): error: it is a directory, not a file"
            ])
        // Bytes that are not UTF-8 (a Latin-1 "é"), rejected rather than replaced.
        let latin1 = dir + "/latin1.yaml"
        #expect(FileManager.default.createFile(atPath: latin1, contents: Data([0x62, 0x6F, 0x61, 0x72, 0x64, 0x3A, 0x20, 0xE9, 0x0A])))
        #expect(
            ConfigLoader.load(path: latin1, options: Fixtures.options()).diagnostics.map(\.description) == [
                "\(latin1):1:8: error: the file is not UTF-8 text (byte 0xE9 at offset 7)"
            ])
        // A path through a regular file.
        #expect(
            ConfigLoader.load(path: latin1 + "/x.yaml", options: Fixtures.options()).diagnostics.map(\.description) == [
                "\(latin1)/x.yaml: error: a part of the path is not a directory"
            ])
    }
}

/// Where the test data is, found from this source file (`#filePath`), so
/// the tests run from any working directory.
enum Fixtures {
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
    static let directory = testsDirectory + "/Fixtures"
    static let packageRoot = URL(fileURLWithPath: testsDirectory).deletingLastPathComponent().deletingLastPathComponent().path
    static let boards = packageRoot + "/boards"
    static let examples = packageRoot + "/examples"

    static func bad(_ name: String) -> String { "\(directory)/bad/\(name).yaml" }

    /// Every config file in the good fixtures and the examples (the fleet's
    /// boards included), sorted by directory then name (`demo.script.yaml`,
    /// the demo's scripted person, is not a config; nor are
    /// `fleet/common.yaml` and `fleet/mqtt.yaml`, the packages the fleet's
    /// boards include).
    static let fleetPackages: Set<String> = ["common.yaml", "mqtt.yaml"]

    static func configPaths() throws -> [String] {
        var paths: [String] = []
        for dir in [directory + "/good", examples, examples + "/fleet"] {
            let names = try FileManager.default.contentsOfDirectory(atPath: dir)
                .filter { $0.hasSuffix(".yaml") && !$0.hasSuffix(".script.yaml") && !$0.hasSuffix(".test.yaml") && !Self.fleetPackages.contains($0) }
                .sorted()
            paths += names.map { dir + "/" + $0 }
        }
        return paths
    }

    /// The checkout's boards only, and a fixed machine.
    static func options(board: String? = nil, machine: MachineInfo = MachineInfo(cpuCount: 2, facts: MachineFacts()))
        -> LoadOptions
    {
        LoadOptions(board: board, catalog: BoardCatalog(directories: [boards]), machine: machine)
    }
}
