# Which of the parallel links each flow of the EWPHCC author's wired runs
# used, and the scenario text that puts our flows on the same links.
#
# The author's script (Wired/codes/1805004_main.tcl, in the repository
# cc-algorithms/src/ewphcc.rs cites) seeds Tcl's generator with srand(19),
# draws two numbers per node (its x and y position: int(10000 * rand()) %
# 750 + 0.5, unused by a wired network), then one per flow: source node
# int(1000 * rand()) % N, folded into 0 .. N/2 - 1, the flow's link (node
# i to node i + N/2). Tcl's rand() is the same generator in every Tcl since
# 8.0, so replaying those draws gives the author's placement; it matches
# the author's results (Wired/results/res_flow.txt: 3241, 5093 and 6019
# packets sent at 10, 20 and 30 flows are 7, 11 and 13 flows of 463 CBR
# packets, and these draws put the flows on 7, 11 and 13 links; the
# author's awk script counts only each link's first flow, the one whose
# agent got port 0).
#
#   tclsh assign.tcl summary          per point: links used, flows per link
#   tclsh assign.tcl toml             the [[experiment]] blocks of paper.toml
#   tclsh assign.tcl base             [[links]] and [[flows]] of parallel.toml

proc draw {m mod a} { expr {int($m * rand()) % $mod + $a} }

# Flows per link (link index -> count) for N nodes and F flows.
proc placement {n f} {
    expr {srand(19)}
    for {set i 0} {$i < $n} {incr i} {
        draw 10000 750 0.5
        draw 10000 750 0.5
    }
    set half [expr {int($n * 0.5)}]
    set counts [dict create]
    for {set i 0} {$i < $f} {incr i} {
        set s [draw 1000 $n 0]
        if {$s >= $half} { set s [expr {$s - $half}] }
        dict incr counts $s
    }
    return [lsort -integer -stride 2 -index 0 $counts]
}

# The algorithms, each on its own copy of the links: prefix and spec.
set algs {
    e ewphcc:decrease=1
    v vegas:alpha=1,beta=3,gamma=1,loss_response=ns2
    t tahoe
}

# `[links, flows]` for one point, as TOML arrays (one line per entry).
proc point {n f pps prefixes indent} {
    global algs
    set links {}
    set flows {}
    foreach {p cc} $algs {
        if {[lsearch $prefixes $p] < 0} { continue }
        dict for {l c} [placement $n $f] {
            lappend links "{ name = \"$p$l\" }"
            lappend flows "{ cc = \"$cc\", count = $c, rate = \"${pps}kbit\", start = \"1s\", duration = \"18.5s\", path = \"$p$l\" }"
        }
    }
    set in [string repeat " " $indent]
    set out "\[\n$in\[\n"
    for {set i 0} {$i < [llength $links]} {incr i 8} {
        append out "$in  [join [lrange $links $i [expr {$i + 7}]] {, }],\n"
    }
    append out "$in\],\n$in\[\n"
    foreach l $flows { append out "$in  $l,\n" }
    append out "$in\],\n\]"
    return $out
}

proc experiment {id source axis labels points prefixes quick} {
    set s "\[\[experiment\]\]\nid = \"$id\"\nsource = \"$source\"\n"
    append s "scenario = \"parallel.toml\"\nquick = $quick\n"
    append s "\[\[experiment.axis\]\]\nname = \"$axis\"\nfield = \[\"links\", \"flows\"\]\n"
    append s "labels = \[[join [lmap l $labels {string cat \" $l \"}] {, }]\]\nvalues = \[\n"
    foreach p $points {
        lassign $p n f pps
        append s "[point $n $f $pps $prefixes 2],\n"
    }
    append s "\]\n"
    return $s
}

switch -- [lindex $argv 0] {
    summary {
        foreach {n f} {20 40 40 40 60 40 80 40 100 40 40 10 40 20 40 30 40 50} {
            set p [placement $n $f]
            puts "N=$n F=$f links=[dict size $p] flows per link: [dict values $p]"
        }
    }
    toml {
        puts [experiment nodes "Graphs (Wired): varying number of nodes (40 flows, 200 packets/s)" \
            nodes {20 40 60 80 100} \
            {{20 40 200} {40 40 200} {60 40 200} {80 40 200} {100 40 200}} {e v} \
            {{ repetitions = 2, keep = { nodes = ["20", "60"] } }}]
        puts [experiment flows "Graphs (Wired): varying number of flows (40 nodes, 200 packets/s)" \
            flows {10 20 30 40 50} \
            {{40 10 200} {40 20 200} {40 30 200} {40 40 200} {40 50 200}} {e v t} \
            {{ repetitions = 2, keep = { flows = ["10", "50"] } }}]
        puts [experiment rate "Graphs (Wired): varying packet rate (40 nodes, 40 flows)" \
            pps {100 200 301 400 500} \
            {{40 40 100} {40 40 200} {40 40 301} {40 40 400} {40 40 500}} {e v t} \
            {{ repetitions = 2, keep = { pps = ["100", "500"] } }}]
    }
    base {
        foreach {p cc} $algs {
            dict for {l c} [placement 40 40] {
                puts "\[\[links\]\]\nname = \"$p$l\"\n"
            }
        }
        foreach {p cc} $algs {
            dict for {l c} [placement 40 40] {
                puts "\[\[flows\]\]\ncc = \"$cc\"\ncount = $c\nrate = \"200kbit\"\nstart = \"1s\"\nduration = \"18.5s\"\npath = \"$p$l\"\n"
            }
        }
    }
}
