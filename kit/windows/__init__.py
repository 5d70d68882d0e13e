"""Flink's DataStream windows on Spark (seed 000), with PyFlink's names.

    from kit.windows import TumblingEventTimeWindows, Count
    result = (kit.stream(clicks, time="cTime", watermark=Duration.of_seconds(5))
                 .key_by("user").window(TumblingEventTimeWindows.of(Time.hours(1)))
                 .aggregate(Count(alias="cnt")))
    result.df          # firings: key, window_start, window_end, cnt, firing, pane, ...

Modules: ``assigners`` (which windows an element belongs to), ``triggers`` (when they
fire), ``evictors``, ``functions`` (reduce, aggregate, process, ...), ``state``,
``operator`` (Flink's WindowOperator for one key: the reference), ``datastream`` (the API
and its execution on Spark), ``placement`` (when a timer fired on the whole stream),
``fast`` (the common case as native Spark), ``compiled`` (the replay in the JVM when every
part of the window is built in).
"""

from .assigners import (EventTimeSessionWindows, GlobalWindow, GlobalWindows, ProcessingTimeSessionWindows,
                        SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeWindow,
                        TumblingEventTimeWindows, TumblingProcessingTimeWindows, WindowAssigner)
from .datastream import DataStream, KeyedStream, OutputTag, WindowedStream, WindowResult, WindowWarning
from .evictors import CountEvictor, DeltaEvictor, Evictor, TimeEvictor, TimestampedValue
from .functions import (AggregateFunction, Aggregates, AllWindowFunction, Avg, Count, FoldFunction, Max, Min,
                        ProcessAllWindowFunction, ProcessWindowFunction, ReduceFunction, Sum, WindowFunction)
from .operator import FATES
from .state import ListStateDescriptor, ReducingStateDescriptor, ValueStateDescriptor
from .triggers import (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger, EventTimeTrigger,
                       NeverTrigger, ProcessingTimeTrigger, PurgingTrigger, Trigger, TriggerResult)

__all__ = ["AggregateFunction", "Aggregates", "AllWindowFunction", "Avg", "ContinuousEventTimeTrigger",
           "ContinuousProcessingTimeTrigger", "Count", "DataStream", "CountEvictor", "CountTrigger", "DeltaEvictor",
           "EventTimeSessionWindows", "EventTimeTrigger", "Evictor", "FATES", "FoldFunction", "GlobalWindow",
           "GlobalWindows", "KeyedStream", "ListStateDescriptor", "Max", "Min", "NeverTrigger", "OutputTag",
           "ProcessAllWindowFunction", "ProcessWindowFunction", "ProcessingTimeSessionWindows",
           "ProcessingTimeTrigger", "PurgingTrigger", "ReduceFunction", "ReducingStateDescriptor",
           "SlidingEventTimeWindows", "SlidingProcessingTimeWindows", "Sum", "TimeEvictor", "TimeWindow",
           "TimestampedValue", "Trigger", "TriggerResult", "TumblingEventTimeWindows",
           "TumblingProcessingTimeWindows", "ValueStateDescriptor", "WindowAssigner", "WindowFunction",
           "WindowResult", "WindowWarning", "WindowedStream"]
